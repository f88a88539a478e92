// SPDX-License-Identifier: MIT
// vindex: FAISS behind a C interface (the rest of tensorfs is C). Every FAISS exception becomes
// an error message.
#include "vindex.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <faiss/IndexIVF.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

struct tfs_vindex {
	std::unique_ptr<faiss::Index> index;
};

static int fail(char *err, size_t cap, const char *what, const std::exception &e)
{
	std::snprintf(err, cap, "%s: %s", what, e.what());
	return -22; // EINVAL
}

extern "C" int tfs_vindex_create(size_t d, size_t nlist, size_t pq_m, int ip,
				 struct tfs_vindex **out, char *err, size_t err_cap)
{
	try {
		std::string spec = "IVF" + std::to_string(nlist) +
				   (pq_m ? ",PQ" + std::to_string(pq_m) : std::string(",Flat"));
		auto *ix = new tfs_vindex;

		ix->index.reset(faiss::index_factory((int)d, spec.c_str(),
						     ip ? faiss::METRIC_INNER_PRODUCT
							: faiss::METRIC_L2));
		*out = ix;
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot make the index", e);
	}
}

extern "C" int tfs_vindex_train(struct tfs_vindex *ix, const float *x, size_t n, char *err,
				size_t err_cap)
{
	try {
		ix->index->train((faiss::Index::idx_t)n, x);
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot train the index", e);
	}
}

extern "C" int tfs_vindex_add(struct tfs_vindex *ix, const float *x, size_t n, const int64_t *ids,
			      char *err, size_t err_cap)
{
	try {
		ix->index->add_with_ids((faiss::Index::idx_t)n, x, (const faiss::Index::idx_t *)ids);
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot add to the index", e);
	}
}

extern "C" int tfs_vindex_save(const struct tfs_vindex *ix, uint8_t **buf, size_t *len,
			       char *err, size_t err_cap)
{
	try {
		faiss::VectorIOWriter w;

		faiss::write_index(ix->index.get(), &w);
		*buf = (uint8_t *)std::malloc(w.data.size() + 1);
		if (!*buf)
			return -12; // ENOMEM
		std::memcpy(*buf, w.data.data(), w.data.size());
		*len = w.data.size();
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot write the index", e);
	}
}

extern "C" int tfs_vindex_load(const uint8_t *buf, size_t len, struct tfs_vindex **out,
			       char *err, size_t err_cap)
{
	try {
		faiss::VectorIOReader r;
		auto *ix = new tfs_vindex;

		r.data.assign(buf, buf + len);
		ix->index.reset(faiss::read_index(&r));
		if (!dynamic_cast<faiss::IndexIVF *>(ix->index.get())) {
			delete ix;
			std::snprintf(err, err_cap, "not an IVF index");
			return -22;
		}
		*out = ix;
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot read the index (damaged?)", e);
	}
}

extern "C" int tfs_vindex_search(const struct tfs_vindex *ix, const float *q, size_t nq,
				 size_t k, size_t nprobe, const int64_t *allowed, size_t nallowed,
				 float *scores, int64_t *rows, char *err, size_t err_cap)
{
	try {
		faiss::SearchParametersIVF p;
		std::unique_ptr<faiss::IDSelectorBatch> sel;

		p.nprobe = nprobe;
		if (allowed) {
			sel.reset(new faiss::IDSelectorBatch(nallowed,
							     (const faiss::Index::idx_t *)allowed));
			p.sel = sel.get();
		}
		ix->index->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, scores,
				  (faiss::Index::idx_t *)rows, &p);
		return 0;
	} catch (const std::exception &e) {
		return fail(err, err_cap, "cannot search the index", e);
	}
}

extern "C" size_t tfs_vindex_dim(const struct tfs_vindex *ix)
{
	return (size_t)ix->index->d;
}

extern "C" size_t tfs_vindex_count(const struct tfs_vindex *ix)
{
	return (size_t)ix->index->ntotal;
}

extern "C" void tfs_vindex_free(struct tfs_vindex *ix)
{
	delete ix;
}

#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// s3rver (the S3-protocol server the tests and benchmarks run on loopback) with the write
// semantics S3 guarantees: a PUT replaces an object atomically, once its whole body is stored.
// s3rver 3.7 writes an object in place and answers before its file stream has flushed, so a
// reader right after a PUT can get a short body, and a PUT cut off mid-body (a writer killed)
// leaves a torn object behind; S3 never shows either. Here the body goes to a temporary file
// that is renamed over the object only when the request's body arrived whole.
//
// It also lists and aborts multipart uploads (ListMultipartUploads, AbortMultipartUpload),
// which s3rver answers with 501 and 405.
//
// With --conditional-writes it also honours S3's conditional PUTs (If-None-Match: * and
// If-Match: "etag", answered 412 PreconditionFailed), checked and applied under one lock per
// key; without it, like s3rver, it ignores them. Other arguments: s3rver's.
'use strict';

const crypto = require('crypto');
const fs = require('fs/promises');
const { createWriteStream } = require('fs');
const http = require('http');
const path = require('path');
const { pipeline, Transform } = require('stream');
const FilesystemStore = require('s3rver/lib/stores/filesystem');
const S3Error = require('s3rver/lib/models/error');

const conditional = process.argv.includes('--conditional-writes');
process.argv = process.argv.filter(a => a !== '--conditional-writes');

// Per key, the tail of the chain of writes in progress: a check and its rename are one step.
const writing = new Map();

async function exclusively(key, fn) {
  const before = writing.get(key) || Promise.resolve();
  let release;
  const mine = new Promise(resolve => (release = resolve));
  const tail = before.then(() => mine);
  writing.set(key, tail);
  await before;
  try {
    return await fn();
  } finally {
    release();
    if (writing.get(key) === tail) writing.delete(key);
  }
}

// 412 unless the request's If-None-Match / If-Match hold for the object as stored now.
async function checkConditions(store, object) {
  const headers = object.content.headers;
  const noneMatch = headers['if-none-match'];
  const match = headers['if-match'];
  if (!noneMatch && !match) return;
  const current = await store.getMetadata(object.bucket, object.key).catch(err => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  const etag = current && current.etag;
  const fail = which =>
    new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
      Condition: which,
    });
  if (noneMatch && noneMatch.trim() === '*' && etag) throw fail('If-None-Match');
  if (match && !(etag && match.split(',').some(m => m.trim() === '*' || m.trim() === etag))) {
    throw fail('If-Match');
  }
}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  // Not a stored object to listings: they take only names ending in the object suffix.
  const tmp = `${objectPath}.${process.pid}-${crypto.randomBytes(6).toString('hex')}.tmp`;
  const md5 = crypto.createHash('md5');
  let size = 0;

  await fs.mkdir(path.dirname(objectPath), { recursive: true });
  try {
    if (Buffer.isBuffer(object.content)) {
      await fs.writeFile(tmp, object.content);
      md5.update(object.content);
      size = object.content.length;
    } else {
      const count = new Transform({
        transform(chunk, encoding, callback) {
          md5.update(chunk, encoding);
          size += chunk.length;
          callback(null, chunk);
        },
      });
      // pipeline() fails when the request is aborted, and resolves only once the file stream
      // has written everything.
      await new Promise((resolve, reject) =>
        pipeline(object.content, count, createWriteStream(tmp), err =>
          err ? reject(err) : resolve(),
        ),
      );
      // A request body (not the parts of a multipart upload) must have arrived whole.
      if (object.content instanceof http.IncomingMessage) {
        const want = Number(object.content.headers['content-length']);
        if (!object.content.complete || (Number.isFinite(want) && size !== want)) {
          throw new Error(`body cut off at ${size} bytes of ${want}`);
        }
      }
    }
    const digest = md5.digest('hex');
    await exclusively(objectPath, async () => {
      if (conditional && object.content instanceof http.IncomingMessage) {
        await checkConditions(this, object);
      }
      // The content first, then its MD5 (the ETag): a read in between gets the new content
      // with the old tag, which fails an If-Match on the new content (a spurious conflict) but
      // never lets a stale one through.
      await fs.rename(tmp, objectPath);
      await this.putMetadata(object.bucket, object.key, object.metadata, digest);
    });
    return { size, md5: digest };
  } catch (err) {
    await fs.rm(tmp, { force: true }).catch(() => {});
    throw err;
  }
};

// Multipart uploads, as s3rver keeps them: <bucket>/._S3rver_uploads/<id>/{key,metadata,N}.
const router = require('s3rver/lib/routes');

function uploadsDir(store, bucket) {
  return store.getResourcePath(bucket, undefined, 'uploads');
}

async function listUploads(ctx) {
  const dir = uploadsDir(ctx.store, ctx.params.bucket);
  const prefix = ctx.query.prefix || '';
  const ids = await fs.readdir(dir).catch(() => []);
  const uploads = [];
  for (const id of ids.sort()) {
    const keyFile = path.join(dir, id, 'key');
    const key = await fs.readFile(keyFile, 'utf8').catch(() => null);
    if (key === null || !key.startsWith(prefix)) continue;
    const st = await fs.stat(keyFile);
    uploads.push({ Key: key, UploadId: id, Initiated: st.mtime.toISOString() });
  }
  uploads.sort((a, b) => (a.Key < b.Key ? -1 : a.Key > b.Key ? 1 : 0));
  ctx.body = {
    ListMultipartUploadsResult: {
      Bucket: ctx.params.bucket,
      Prefix: prefix,
      MaxUploads: 1000,
      IsTruncated: false,
      Upload: uploads,
    },
  };
}

async function abortUpload(ctx) {
  const dir = path.join(uploadsDir(ctx.store, ctx.params.bucket), ctx.query.uploadId);
  const key = await fs.readFile(path.join(dir, 'key'), 'utf8').catch(() => null);
  if (key === null || key !== ctx.params.key) {
    throw new S3Error('NoSuchUpload', 'The specified upload does not exist.', {
      UploadId: ctx.query.uploadId,
    });
  }
  await fs.rm(dir, { recursive: true, force: true });
  ctx.status = 204;
}

router.get('/:bucket', (ctx, next) => ('uploads' in ctx.query ? listUploads(ctx) : next()));
router.delete('/:bucket/:key+', (ctx, next) =>
  'uploadId' in ctx.query ? abortUpload(ctx) : next(),
);
// Ahead of s3rver's own routes, which would refuse these.
router.stack.unshift(router.stack.pop(), router.stack.pop());

require('s3rver/bin/s3rver.js');

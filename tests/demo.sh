#!/bin/bash
# SPDX-License-Identifier: MIT
# demo: build a small synthetic image dataset, import it, mount it and read it back through numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
TENSORFS=${TENSORFS_BIN:-$PWD/tensorfs}
PY=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d /tmp/tensorfs-demo.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"

cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"; fi
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

echo "demo work directory: $work"
step "generate 4096 synthetic 32x32x3 uint8 images and int64 labels (numpy)"
"$PY" - "$work" <<'PYEOF'
import sys, numpy as np
work = sys.argv[1]
rng = np.random.default_rng(0)
n = 4096
labels = rng.integers(0, 10, size=n, dtype=np.int64)
# Each class is a coloured gradient with noise: compressible, like real images, but not trivial.
y, x = np.mgrid[0:32, 0:32]
base = np.stack([x * 4, y * 4, (x + y) * 2], axis=-1).astype(np.int16)
images = (base[None] + labels[:, None, None, None] * 10
          + rng.integers(0, 16, size=(n, 32, 32, 3))).clip(0, 255).astype(np.uint8)
np.save(f"{work}/images.npy", images)
np.save(f"{work}/labels.npy", labels)
print(f"images.npy {images.shape} {images.dtype}, labels.npy {labels.shape} {labels.dtype}")
PYEOF

step "tensorfs create file://$work/lake/cifar"
"$TENSORFS" create "file://$work/lake/cifar"
step "tensorfs import file://$work/lake/cifar image=images.npy label=labels.npy -m initial"
"$TENSORFS" import "file://$work/lake/cifar" "image=$work/images.npy" "label=$work/labels.npy" -m "initial"
step "tensorfs info file://$work/lake/cifar"
"$TENSORFS" info "file://$work/lake/cifar"
step "tensorfs mount file://$work/lake $mnt"
"$TENSORFS" mount "file://$work/lake" "$mnt"
step "ls -l $mnt/cifar/main"
ls -l "$mnt/cifar/main"
step "read it back through numpy (np.load mmap_mode='r')"
"$PY" - "$work" "$mnt" <<'PYEOF'
import sys, numpy as np
work, mnt = sys.argv[1], sys.argv[2]
img = np.load(f"{mnt}/cifar/main/image.npy", mmap_mode="r")
lab = np.load(f"{mnt}/cifar/main/label.npy", mmap_mode="r")
print("image.npy:", img.shape, img.dtype, " label.npy:", lab.shape, lab.dtype)
print("label counts:", np.bincount(lab, minlength=10).tolist())
print("mean pixel of image 0:", float(img[0].mean()))
same = np.array_equal(img, np.load(f"{work}/images.npy")) and np.array_equal(lab, np.load(f"{work}/labels.npy"))
print("identical to the imported arrays:", same)
sys.exit(0 if same else 1)
PYEOF
step "fusermount3 -u $mnt"
fusermount3 -u "$mnt"
echo "done"

# SPDX-License-Identifier: MIT
"""PyTorch reads mounted columns with its own tools (from_numpy on a memmap, DataLoader)."""

import warnings

import numpy as np
import torch

N = 3000


class RowDataset(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self.x[i])), int(self.y[i]), i


def test_torch(lake, mount):
    rng = np.random.default_rng(5)
    cols = {
        "image": rng.standard_normal((N, 3, 8, 8)).astype("<f4"),
        "label": rng.integers(0, 10, size=N).astype("<i8"),
        "half": rng.standard_normal((N, 16)).astype("<f2"),
        "mask": rng.integers(0, 2, size=(N, 4)).astype(bool),
    }
    lake.build("tt", cols, "--chunk-size", "64k")
    m = mount(lake)
    main = m.path / "tt" / "main"
    for name, src in cols.items():
        mm = np.load(main / f"{name}.npy", mmap_mode="r")
        # a copy
        t = torch.from_numpy(np.array(mm))
        assert t.shape == torch.Size(src.shape)
        assert torch.equal(t, torch.from_numpy(src)), name
        # directly on the read-only memmap (torch warns that it is not writable)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            tv = torch.from_numpy(mm)
        assert torch.equal(tv[100:2000:7], torch.from_numpy(src[100:2000:7])), name
        del tv, t, mm

    x = np.load(main / "image.npy", mmap_mode="r")
    y = np.load(main / "label.npy", mmap_mode="r")
    loader = torch.utils.data.DataLoader(RowDataset(x, y), batch_size=256, shuffle=True,
                                         generator=torch.Generator().manual_seed(0),
                                         num_workers=0)
    seen = []
    for xb, yb, ib in loader:
        assert xb.dtype == torch.float32 and xb.shape[1:] == (3, 8, 8)
        idx = ib.numpy()
        assert torch.equal(xb, torch.from_numpy(cols["image"][idx]))
        assert torch.equal(yb, torch.from_numpy(cols["label"][idx]))
        seen.extend(idx.tolist())
    assert sorted(seen) == list(range(N))
    del x, y, loader


def test_device_slots_reach_torch_as_cuda_arrays():
    """A CUDA batch's column is a tensor torch makes from the CUDA array interface of a small
    object (staging.py's _DeviceArray): torch must see the interface on the instance. Without a
    CUDA build of torch, it is seen when torch goes on to initialise CUDA (rather than failing
    to infer a dtype, as for an object without one)."""
    import pytest
    from tensorfs.staging import _DeviceArray

    if torch.cuda.is_available():
        pytest.skip("with CUDA, tests/gpu stages real batches")
    cai = {"shape": (4, 3), "typestr": "<f4", "data": (4096, False), "version": 2,
           "strides": None}
    for obj, seen in ((_DeviceArray(cai), True), (object(), False)):
        try:
            torch.as_tensor(obj, device="cuda:0")
        except (RuntimeError, AssertionError) as e:
            assert ("infer dtype" not in str(e)) == seen, str(e)
        else:
            raise AssertionError("a tensor on a device this torch lacks")

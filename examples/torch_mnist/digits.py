"""Generated stand-ins for MNIST (no download): 28x28 grey digits drawn as pen strokes with a random pose
(shift, scale, rotation, slant), stroke width and pixel noise. Image i of a split is the same on every run.
Normalized like torchvision's MNIST transform (mean 0.1307, std 0.3081)."""
import numpy as np
import torch

# Each digit: strokes as polylines in a unit box (x right, y down).
_STROKES = {
    0: [[(0.5, 0.1), (0.2, 0.3), (0.2, 0.7), (0.5, 0.9), (0.8, 0.7), (0.8, 0.3), (0.5, 0.1)]],
    1: [[(0.35, 0.25), (0.55, 0.1), (0.55, 0.9)]],
    2: [[(0.2, 0.3), (0.5, 0.1), (0.8, 0.3), (0.2, 0.9), (0.8, 0.9)]],
    3: [[(0.2, 0.15), (0.75, 0.15), (0.45, 0.45), (0.8, 0.65), (0.5, 0.9), (0.2, 0.8)]],
    4: [[(0.65, 0.9), (0.65, 0.1), (0.2, 0.65), (0.85, 0.65)]],
    5: [[(0.8, 0.1), (0.25, 0.1), (0.22, 0.45), (0.7, 0.5), (0.75, 0.8), (0.45, 0.92), (0.2, 0.8)]],
    6: [[(0.7, 0.1), (0.3, 0.45), (0.25, 0.8), (0.5, 0.92), (0.75, 0.75), (0.5, 0.5), (0.28, 0.65)]],
    7: [[(0.2, 0.12), (0.8, 0.12), (0.4, 0.9)]],
    8: [[(0.5, 0.5), (0.25, 0.3), (0.5, 0.1), (0.75, 0.3), (0.5, 0.5), (0.22, 0.72), (0.5, 0.92),
         (0.78, 0.72), (0.5, 0.5)]],
    9: [[(0.72, 0.5), (0.5, 0.58), (0.27, 0.35), (0.5, 0.1), (0.75, 0.3), (0.72, 0.5), (0.6, 0.9)]],
}
_MAX_SEGMENTS = max(sum(len(line) - 1 for line in lines) for lines in _STROKES.values())


def _segments(lines):
    """[_MAX_SEGMENTS, 2 ends, 2 coords]: the digit's segments, the last repeated to a common count."""
    seg = [[a, b] for line in lines for a, b in zip(line[:-1], line[1:])]
    seg += [seg[-1]] * (_MAX_SEGMENTS - len(seg))
    return np.array(seg, dtype=np.float64)


_SEGMENTS = np.stack([_segments(_STROKES[d]) for d in range(10)])  # [10, S, 2, 2]
SIDE = 28


def _stream(seed, k, n, draw):
    """n values of random parameter k of split `seed`: value i is the same for every n > i."""
    return draw(np.random.default_rng([seed, k]), n)


def render(size, seed, chunk=2000):
    """(images [size, 28, 28] float32 in [0, 1], labels [size] int64) of split `seed`."""
    labels = _stream(seed, 0, size, lambda r, n: r.integers(10, size=n))
    angle = _stream(seed, 1, size, lambda r, n: r.uniform(-0.3, 0.3, n))
    scale = _stream(seed, 2, size, lambda r, n: r.uniform(15.0, 20.0, n))
    slant = _stream(seed, 3, size, lambda r, n: r.uniform(-0.3, 0.3, n))
    shift = _stream(seed, 4, size, lambda r, n: r.uniform(-2.5, 2.5, (n, 2)))
    width = _stream(seed, 5, size, lambda r, n: r.uniform(0.5, 1.2, n))
    noise = _stream(seed, 6, size, lambda r, n: r.normal(0.0, 0.05, (n, SIDE * SIDE)))
    ys, xs = np.mgrid[0:SIDE, 0:SIDE] + 0.5
    grid = torch.from_numpy(np.stack([xs.ravel(), ys.ravel()], axis=1)).float()[None, :, None, :]  # [1, 784, 1, 2]
    images = np.empty((size, SIDE * SIDE), dtype=np.float32)
    for lo in range(0, size, chunk):
        hi = min(size, lo + chunk)
        c, s, k = np.cos(angle[lo:hi]), np.sin(angle[lo:hi]), scale[lo:hi]
        pose = k[:, None, None] * np.stack([np.stack([c, -s + slant[lo:hi]], 1), np.stack([s, c], 1)], 1)
        seg = np.einsum("bsej,bij->bsei", _SEGMENTS[labels[lo:hi]] - 0.5, pose)
        seg = torch.from_numpy(seg + SIDE / 2 + shift[lo:hi, None, None, :]).float()
        a, b = seg[:, None, :, 0, :], seg[:, None, :, 1, :]  # [B, 1, S, 2]
        ab = b - a
        pa = grid - a  # [B, 784, S, 2]
        t = ((pa * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-9)).clamp(0.0, 1.0)
        dist = (pa - t.unsqueeze(-1) * ab).norm(dim=-1).amin(dim=2).numpy()  # [B, 784]
        ink = np.clip(width[lo:hi, None] + 0.5 - dist, 0.0, 1.0)
        images[lo:hi] = np.clip(ink + noise[lo:hi], 0.0, 1.0)
    return images.reshape(size, SIDE, SIDE), labels.astype(np.int64)


class Digits(torch.utils.data.Dataset):
    """A split of `size` generated digits; train and test splits use different seeds."""

    def __init__(self, size, train=True):
        images, labels = render(size, 1 if train else 2)
        self.images = torch.from_numpy((images - 0.1307) / 0.3081).unsqueeze(1)
        self.labels = torch.from_numpy(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]

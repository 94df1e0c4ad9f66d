# The records of the file system benchmarks (bench/fsbench.sh,
# bench/loopbench.sh), deterministic from one seed: smooth uint8 images of
# 3x224x224 (147 KiB) and int32[512] token blocks (2 KiB), drawn in that
# order from one generator.
import numpy as np


def records(n_vision, n_token):
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:224, 0:224].astype(np.float32)

    def vision(i):
        a, b, c = rng.uniform(0.01, 0.08, 3)
        img = [127 + 120 * np.sin(a * x + b * y + c * i + k) for k in range(3)]
        return np.clip(np.stack(img), 0, 255).astype(np.uint8)

    images = np.stack([vision(i) for i in range(n_vision)])
    tokens = rng.integers(0, 50000, size=(n_token, 512), dtype=np.int32)
    return images, tokens

// norm ops: device kernels (filled in by issue 4).

"""Side-by-side benchmarks: every figure is reported next to a peer measured in the same run."""

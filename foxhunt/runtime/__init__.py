"""The async shell around the kernel: clocks, the trading loop, the live daemon and replay."""

"""Building and timing candidates on the real IREE compiler and runtime."""

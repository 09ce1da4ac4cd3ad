"""The search space and how it is explored: sketches, annotations, policies."""

"""Whole trees: discovery, the worker pool and Ray executors, the cache, isolation and safe writes."""

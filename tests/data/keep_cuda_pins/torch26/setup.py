from setuptools import setup

setup(name="pinned-26", install_requires=["numpy", "vllm>=0.8.0,<0.9"])

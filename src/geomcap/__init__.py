"""geomcap: the geometry of capability acquisition in small transformers.

Executable companion to J. Billa, "The Geometric Anatomy of Capability
Acquisition in Transformers" (arXiv:2602.15997).
"""

__version__ = "0.1.0"

"""geomcap: the geometry of capability acquisition in small transformers.

Executable companion to J. Billa, "The Geometric Anatomy of Capability
Acquisition in Transformers" (arXiv:2602.15997).
"""

__version__ = "0.1.0"


def _text_progress_bars() -> None:
    """transformers and devinterp import ``tqdm.auto``: in a notebook without ipywidgets it warns that
    IProgress is not found (naming a file of the virtual environment) and falls back to text bars. Import it
    once, here, with that warning silenced: inside notebooks the bars are plain text, and the book shows
    nothing of the machine that built it."""
    import warnings

    try:
        from tqdm import TqdmWarning
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TqdmWarning)
        import tqdm.auto  # noqa: F401


_text_progress_bars()

"""The paper's claims, one module per claim: its tables, its text, its rule (``RULE``) and its verdict.

* :mod:`~geomcap.claims.verdicts` -- the verdict words, the thresholds the rules share, one row of the table;
* :mod:`~geomcap.claims.c1` .. :mod:`~geomcap.claims.c8` -- one claim each (C7 on Pythia or its stand-in);
* :mod:`~geomcap.claims.table` -- the claims table, C1 to C8 by one path, its verdict and glue tables, and
  each claim's effect beside the negative controls.

Nothing here imports torch, the training loop or the sweep; the runs are read from the store
(:mod:`geomcap.analysis`). :mod:`geomcap.results` imports these names for readers of the previous layout.
"""

from geomcap.claims.table import claims_from_store, verdict_table  # noqa: E402 (the table, by the package's name)

__all__ = ["claims_from_store", "verdict_table"]

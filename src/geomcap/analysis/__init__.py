"""The analysis of a run store, without torch: from each run's recorded series to the events the claims are
about, and from the runs of a store to tables. One module per part:

* :mod:`~geomcap.analysis.protocol` -- every parameter of every rule, defined once;
* :mod:`~geomcap.analysis.series` -- checked inputs, medians, arrays out of a tidy metrics table;
* :mod:`~geomcap.analysis.acquisition` -- acquisition, the plateau at chance, a run's chance levels;
* :mod:`~geomcap.analysis.collapse` -- collapse, floor and recovery (C1), the streaming view of them;
* :mod:`~geomcap.analysis.transition` -- transitions and precursors (C5);
* :mod:`~geomcap.analysis.topdown` -- the top-down order of the layers' collapse (C3);
* :mod:`~geomcap.analysis.summary` -- every event of one run (``geomcap show``);
* :mod:`~geomcap.analysis.runs` -- a store's runs and metrics as tables, and the arms of a claims table;
* :mod:`~geomcap.analysis.selection` -- a notebook's selection of runs, its parameters checked;
* :mod:`~geomcap.analysis.table` -- the summary table, one row per run;
* :mod:`~geomcap.analysis.difficulty` -- difficulty from behaviour alone;
* :mod:`~geomcap.analysis.intervals` -- intervals over settings (the setting bootstrap);
* :mod:`~geomcap.analysis.costs`, :mod:`~geomcap.analysis.sensitivity`,
  :mod:`~geomcap.analysis.memorisation`, :mod:`~geomcap.analysis.twins` -- the measures' cost, the sensitivity
  grid, memorisation before generalisation, twins;
* :mod:`~geomcap.analysis.display` -- tables as the book shows them;
* :mod:`~geomcap.analysis.pythia_revisions`, :mod:`~geomcap.analysis.pythia_runs` -- Pythia's revision names and
  the stored Pythia runs (C7), read without the loaders of :mod:`geomcap.pythia`;
* :mod:`~geomcap.analysis.integrity` -- which revisions of a series of checkpoints are copies of others, from their
  content digests; :mod:`~geomcap.analysis.pythia_upstream` -- the same read from the upstream reports on the public
  Pythia checkpoints.

The claims and their verdicts are :mod:`geomcap.claims`'. :mod:`geomcap.events` and :mod:`geomcap.results`
import these names for readers of the previous layout.
"""

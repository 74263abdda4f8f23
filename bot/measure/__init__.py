"""What ``run``, ``pr``, ``nightly`` and ``calibrate`` share around the measuring loop: the
options, the progress, listing a side's suites, building a results file, the checks on what
was measured, and letting go of credentials before a repository's code runs."""

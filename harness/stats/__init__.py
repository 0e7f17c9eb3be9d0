"""Statistics the figures are computed with, each method implemented once (units are the caller's):

* :mod:`harness.stats.percentile`: the one percentile of a sample (linear between closest ranks, numpy's default);
* :mod:`harness.stats.intervals`: one helper per confidence-interval method (order statistics of a percentile,
  normal mean, delta-method ratio of sums, Student's t quantile, least-squares slope).

Pure Python, no imports from the rest of the package (the exporter, the search and the report all use them).
Estimates read from a histogram (:meth:`harness.histogram.LogHistogram.quantile`, nearest rank over log buckets;
:class:`harness.quantiles.BucketCounts`) are a different estimator, documented where they are defined.
"""

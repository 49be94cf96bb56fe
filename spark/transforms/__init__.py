"""Pure DataFrame -> DataFrame transforms: lag, throughput, retention, usage
(``burrow`` is the plain-Python lag evaluation the lag transform applies)."""

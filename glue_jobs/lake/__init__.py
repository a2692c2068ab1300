"""The lake: where a micro-batch's verdicts are written (the layout of the Parquet lake and its table, Iceberg, the
dead letters, the duplicate ranking) and the file system under them. Imports the earlier stages (sources, decoding,
contract), never the commit stage."""

package org.apache.iceberg.aws.s3;

import org.apache.iceberg.hadoop.HadoopFileIO;

/**
 * Stands in for Iceberg's S3FileIO (iceberg-aws, on Glue's classpath with `--datalake-formats iceberg`) under the
 * class name the deployed job configures (`spark.sql.catalog.glue_catalog.io-impl`): the rehearsal turns every
 * s3:// location into a local folder (rehearsal/run.py LocalS3), which Iceberg's HadoopFileIO reads and writes.
 */
public class S3FileIO extends HadoopFileIO {
}

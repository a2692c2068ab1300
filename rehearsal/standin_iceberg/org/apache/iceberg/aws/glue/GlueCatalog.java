package org.apache.iceberg.aws.glue;

import com.amazonaws.services.glue.Rehearsal;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.jdbc.JdbcCatalog;

/**
 * Stands in for Iceberg's GlueCatalog (the iceberg-aws module, which Glue puts on the job's classpath for
 * `--datalake-formats iceberg`: "Using the Iceberg framework in AWS Glue",
 * https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-format-iceberg.html) under the class name the
 * deployed job configures (`spark.sql.catalog.glue_catalog.catalog-impl`). The Data Catalog is AWS-side, so the
 * tables live in Iceberg's own JDBC catalog on a SQLite file of the rehearsal (setup key "iceberg_catalog"), which the
 * checks read with pyiceberg. Everything else is Iceberg's: the job's warehouse and table location, the commits,
 * the snapshot summaries. It reports the catalog properties the job set (GlueCatalog reads `glue.skip-archive`:
 * Iceberg's AwsProperties) for the rehearsal to check. Not reproduced: the Data Catalog table's Parameters, Lake Formation, IAM.
 */
public class GlueCatalog extends JdbcCatalog {
  @Override
  public void initialize(String name, Map<String, String> properties) {
    Object file = Rehearsal.setup().get("iceberg_catalog");
    if (file == null) {
      throw new IllegalStateException("the rehearsal gave no iceberg_catalog for a job with --datalake-formats iceberg");
    }
    Map<String, String> jdbc = new HashMap<>(properties);
    jdbc.put("uri", "jdbc:sqlite:" + file + "?journal_mode=WAL");
    jdbc.put("jdbc.schema-version", "V1");
    Rehearsal.report("{\"event\":\"iceberg_catalog\",\"name\":" + Rehearsal.quote(name) + ",\"warehouse\":"
        + Rehearsal.quote(String.valueOf(properties.get("warehouse"))) + ",\"io_impl\":"
        + Rehearsal.quote(String.valueOf(properties.get("io-impl"))) + ",\"skip_archive\":"
        + Rehearsal.quote(String.valueOf(properties.get("glue.skip-archive"))) + "}");
    super.initialize(name, jdbc);
  }
}

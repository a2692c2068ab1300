package com.amazonaws.services.glue;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * Counts the rows each micro-batch reads from the source, over every pass its work makes: an observed
 * count on the source frame itself (Dataset.observe), whose accumulator every recomputation of the
 * batch adds to, reported per batch from the query's progress. A pass over the source is what a Kinesis
 * source pays in GetRecords calls. Not Glue behaviour: the rehearsal's own measurement, switched on by
 * the setup ("observe_source_reads"), since the observation itself costs a little per row.
 */
final class SourceReads extends StreamingQueryListener {
  static final String NAME = "rehearsal_source_reads";
  private static boolean registered;

  static synchronized Dataset<Row> observe(SparkSession spark, Dataset<Row> frame) {
    if (!registered) {
      spark.streams().addListener(new SourceReads());
      registered = true;
    }
    return frame.observe(NAME, functions.count(functions.lit(1)).as("rows"), new Column[0]);
  }

  @Override
  public void onQueryStarted(QueryStartedEvent event) {}

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    Row observed = event.progress().observedMetrics().get(NAME);
    if (observed != null) {
      Rehearsal.report("{\"event\":\"source_reads\",\"batch\":" + event.progress().batchId()
          + ",\"input_rows\":" + event.progress().numInputRows() + ",\"rows_read\":" + observed.getLong(0) + "}");
    }
  }

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {}
}

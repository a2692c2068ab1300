package org.apache.spark.metrics.source;

import com.amazonaws.services.glue.Rehearsal;

/**
 * Stand-in for Glue's streaming metrics source: awsglue/context.py forEachBatch calls
 * {@code StreamingSource.updateNumRecords(n)} after counting a persisted batch and
 * {@code StreamingSource.updateBatchProcessingTimeInMs(ms)} after every batch; both are reported.
 */
public final class StreamingSource {
  private StreamingSource() {}

  public static void updateNumRecords(long records) {
    Rehearsal.report("{\"event\":\"num_records\",\"records\":" + records + "}");
  }

  public static void updateBatchProcessingTimeInMs(long millis) {
    Rehearsal.report("{\"event\":\"batch_processing_time\",\"millis\":" + millis + "}");
  }
}

package com.amazonaws.services.glue.util;

import com.amazonaws.services.glue.Rehearsal;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/**
 * Stand-in for Glue's Job object (awsglue/job.py: {@code Job.init(name, sparkSession, args)},
 * {@code Job.commit()}, {@code Job.isInitialized()}). Records the calls in the rehearsal report; a commit
 * without init fails, as a job with bookmarks would have nothing to commit.
 */
public final class Job {
  private static String name;

  private Job() {}

  public static synchronized void init(String jobName, SparkSession session, Map<String, String> args) {
    if (jobName == null || jobName.isEmpty()) {
      throw new IllegalArgumentException("Job.init: job name is empty");
    }
    name = jobName;
    Rehearsal.report("{\"event\":\"job_init\",\"job\":" + Rehearsal.quote(jobName) + "}");
  }

  public static synchronized boolean isInitialized() {
    return name != null;
  }

  public static synchronized void commit() {
    if (name == null) {
      throw new IllegalStateException("Job.commit called before Job.init");
    }
    Rehearsal.report("{\"event\":\"job_commit\",\"job\":" + Rehearsal.quote(name) + "}");
  }
}

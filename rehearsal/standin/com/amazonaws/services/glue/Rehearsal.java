package com.amazonaws.services.glue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * What the rehearsal hands the stand-in (environment variable GLUE_STANDIN_SETUP, a JSON file written by
 * rehearsal/run.py) and where the stand-in reports what the job did (GLUE_STANDIN_REPORT, JSON lines):
 * Job.init/commit, the options a source got, each batch's processing time and (when asked) source reads.
 */
public final class Rehearsal {
  private static Map<String, Object> setup;

  private Rehearsal() {}

  @SuppressWarnings("unchecked")
  public static synchronized Map<String, Object> setup() {
    if (setup == null) {
      String path = System.getenv("GLUE_STANDIN_SETUP");
      if (path == null) {
        throw new IllegalStateException("GLUE_STANDIN_SETUP is not set: the Glue stand-in runs only under the rehearsal");
      }
      try {
        setup = new ObjectMapper().readValue(new java.io.File(path), Map.class);
      } catch (IOException e) {
        throw new IllegalStateException("cannot read the rehearsal setup " + path, e);
      }
    }
    return setup;
  }

  public static synchronized void report(String jsonLine) {
    String path = System.getenv("GLUE_STANDIN_REPORT");
    if (path == null) {
      return;
    }
    try (Writer out = new FileWriter(path, StandardCharsets.UTF_8, true)) {
      out.write(jsonLine);
      out.write('\n');
    } catch (IOException e) {
      throw new IllegalStateException("cannot append to the rehearsal report " + path, e);
    }
  }


  public static String quote(String text) {
    try {
      return new ObjectMapper().writeValueAsString(text);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}

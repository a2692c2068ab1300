package com.amazonaws.services.glue.log;

/** Stand-in for Glue's GlueLogger (awsglue/context.py creates one per GlueContext): lines to stderr. */
public final class GlueLogger {
  private void log(String level, Object message) {
    System.err.println("GlueLogger " + level + " " + message);
  }

  public void info(Object message) { log("INFO", message); }

  public void warn(Object message) { log("WARN", message); }

  public void error(Object message) { log("ERROR", message); }

  public void debug(Object message) { log("DEBUG", message); }
}

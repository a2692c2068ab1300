package com.amazonaws.services.glue.util;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Stand-in for Glue's JsonOptions: awsglue/utils.py makeOptions() hands every option dict to the JVM as
 * {@code sc._jvm.JsonOptions(json.dumps(options))}. Values are kept as their JSON text (strings stay strings).
 */
public final class JsonOptions {
  private final Map<String, String> values = new LinkedHashMap<>();

  public JsonOptions(String json) {
    try {
      Map<?, ?> parsed = new ObjectMapper().readValue(json, Map.class);
      for (Map.Entry<?, ?> e : parsed.entrySet()) {
        Object v = e.getValue();
        values.put(String.valueOf(e.getKey()), v == null ? null : (v instanceof String ? (String) v : new ObjectMapper().writeValueAsString(v)));
      }
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("JsonOptions: not a JSON object: " + json, e);
    }
  }

  public Map<String, String> asMap() {
    return Collections.unmodifiableMap(values);
  }

  @Override
  public String toString() {
    return values.toString();
  }
}

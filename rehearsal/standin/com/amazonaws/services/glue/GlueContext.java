package com.amazonaws.services.glue;

import com.amazonaws.services.glue.util.JsonOptions;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.DataStreamReader;
import org.apache.spark.sql.types.StructType;

/**
 * Stand-in for the Scala GlueContext behind awsglue/context.py, for the one call this project's streaming
 * job makes: create_data_frame.from_catalog(...) -> getCatalogSource(...).getDataFrame(). The catalog
 * table is the synthesized one (rehearsal/assembly.py hands its parameters and columns over in
 * GLUE_STANDIN_SETUP); the records are the rehearsal's held input, one file per micro-batch.
 *
 * Every rule below names the page or code it follows. An option neither page lists fails the rehearsal.
 */
public final class GlueContext {
  /** Table parameters that describe the table rather than the connection (the Glue console writes them). */
  private static final Set<String> TABLE_PARAMETERS = set("EXTERNAL", "typeOfData");

  /**
   * Kinesis read options, from "Kinesis connections" (Connection types and options for ETL in AWS Glue):
   * https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-connect-kinesis-home.html
   */
  private static final Set<String> KINESIS_OPTIONS = set(
      "streamARN", "classification", "streamName", "endpointUrl", "delimiter", "startingPosition",
      "failOnDataLoss", "awsSTSRoleARN", "awsSTSSessionName", "awsSTSEndpoint", "maxFetchTimeInMs",
      "maxFetchRecordsPerShard", "maxRecordPerRead", "addIdleTimeBetweenReads", "idleTimeBetweenReadsInMs",
      "describeShardInterval", "numRetries", "retryIntervalMs", "maxRetryIntervalMs", "avoidEmptyBatches",
      "schema", "inferSchema", "avroSchema", "addRecordTimestamp", "emitConsumerLagMetrics", "fanoutConsumerARN");

  /**
   * The column holding a Kinesis record's text when classification is json and inferSchema is true. No AWS
   * page names it (unverified); public Glue scripts read it by this name, and some local runs spell it
   * "$json$data_infer_schema$.temporary$" (glue_jobs/sources/__init__.py accepts both).
   */
  static final String KINESIS_RAW_COLUMN = "$json$data_infer_schema$_temporary$";

  /**
   * "When this option is set to 'true', the data output will contain an additional column named
   * "__src_timestamp" that indicates the time when the corresponding record received by the stream"
   * (addRecordTimestamp, Kinesis connections page, Glue 4.0 or later). Its type is not documented
   * (unverified): the stand-in gives a timestamp, the time the micro-batch reads the record.
   */
  static final String RECORD_TIMESTAMP_COLUMN = "__src_timestamp";

  private final SparkSession spark;
  private final Map<String, Object> setup;

  public GlueContext(SparkContext sc) {
    this.spark = SparkSession.builder().sparkContext(sc).getOrCreate();
    this.setup = Rehearsal.setup();
  }

  public GlueContext(SparkContext sc, Object minPartitions, Object targetPartitions) {
    throw new UnsupportedOperationException("stand-in: GlueContext(minPartitions, targetPartitions) is not rehearsed");
  }

  /** awsglue/context.py create_data_frame_from_catalog wraps the result in a StreamingDataSource. */
  public StreamingCatalogSource getCatalogSource(String database, String table, String redshiftTmpDir,
      String transformationCtx, String pushDownPredicate, JsonOptions additionalOptions, String catalogId) {
    if (pushDownPredicate != null && !pushDownPredicate.isEmpty()) {
      throw new IllegalArgumentException("stand-in: push_down_predicate is not rehearsed for streaming sources");
    }
    Map<String, Object> tables = map(setup.get("tables"));
    Map<String, Object> entry = map(tables.get(database + "." + table));
    if (entry == null) {
      throw new IllegalArgumentException("EntityNotFoundException: table " + database + "." + table
          + " is not in the synthesized catalog (known: " + tables.keySet() + ")");
    }
    Map<String, Object> parameters = map(entry.get("parameters"));
    // With from_catalog "the job has the Data Catalog database and table name information, and can use that
    // to obtain some basic parameters for reading from the Kinesis streaming source" (Kinesis connections
    // page); additional_options are the connection options of the same page. Where both give a value the
    // stand-in takes additional_options' (unverified: no page says which wins).
    Map<String, String> options = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : parameters.entrySet()) {
      if (!TABLE_PARAMETERS.contains(e.getKey())) {
        options.put(e.getKey(), String.valueOf(e.getValue()));
      }
    }
    options.putAll(additionalOptions.asMap());
    String typeOfData = String.valueOf(parameters.get("typeOfData"));
    String input = String.valueOf(entry.get("input"));
    Rehearsal.report("{\"event\":\"source\",\"table\":" + Rehearsal.quote(database + "." + table)
        + ",\"options\":" + Rehearsal.quote(options.toString()) + "}");
    Dataset<Row> frame;
    if ("kinesis".equals(typeOfData)) {
      frame = kinesis(options, columns(entry), input);
    } else {
      // The Kafka jobs read their topic with Spark's Kafka source, never a catalog table (docs/kafka.md).
      throw new IllegalArgumentException("stand-in: table " + table + " has typeOfData " + typeOfData
          + "; only kinesis streaming tables are rehearsed");
    }
    if (flag(options, "addRecordTimestamp")) {
      frame = frame.withColumn(RECORD_TIMESTAMP_COLUMN, functions.current_timestamp());
    }
    if (Boolean.TRUE.equals(setup.get("observe_source_reads"))) {
      frame = SourceReads.observe(spark, frame);
    }
    return new StreamingCatalogSource(frame);
  }

  private Dataset<Row> kinesis(Map<String, String> options, StructType columns, String input) {
    known(options, KINESIS_OPTIONS, "Kinesis");
    if (!options.containsKey("streamARN") && !(options.containsKey("streamName") && options.containsKey("endpointUrl"))) {
      throw new IllegalArgumentException("Kinesis source: streamARN, or streamName and endpointUrl, is required");
    }
    // "classification: Required unless provided through the Data Catalog" (Kinesis connections page).
    String classification = required(options, "classification", "Kinesis");
    if (!"json".equals(classification)) {
      throw new IllegalArgumentException("stand-in: Kinesis classification " + classification + " is not rehearsed (json is)");
    }
    startingPosition(options.get("startingPosition"));
    Dataset<Row> records = stream("text", input).load(input);
    if (flag(options, "inferSchema")) {
      return records.select(functions.col("value").as(KINESIS_RAW_COLUMN));
    }
    // inferSchema false: "schema (Required when inferSchema set to false) ... The schema to use to process the
    // payload"; from the catalog, the table's columns. The record text itself is not in the frame.
    Column parsed = functions.from_json(functions.col("value"), columns);
    return records.select(parsed.as("r")).select("r.*");
  }

  private DataStreamReader stream(String format, String input) {
    Object perBatch = setup.getOrDefault("files_per_batch", 1);
    return spark.readStream().format(format).option("maxFilesPerTrigger", String.valueOf(perBatch));
  }

  private static void startingPosition(String value) {
    if (value == null) {
      return;
    }
    String lower = value.toLowerCase(Locale.ROOT);
    // "Possible values are "latest", "trim_horizon", "earliest", or a Timestamp string in UTC format"
    // (startingPosition, Kinesis connections page).
    if (!lower.equals("latest") && !lower.equals("trim_horizon") && !lower.equals("earliest")
        && !value.matches("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}.*Z")) {
      throw new IllegalArgumentException("Kinesis source: startingPosition " + value + " is not latest, trim_horizon, earliest or a UTC timestamp");
    }
  }

  private static void known(Map<String, String> options, Set<String> known, String source) {
    for (String name : options.keySet()) {
      if (!known.contains(name)) {
        throw new IllegalArgumentException(source + " source: option " + name + " is not a documented " + source
            + " connection option (stand-in knows " + new java.util.TreeSet<>(known) + ")");
      }
    }
    for (String flagName : Arrays.asList("inferSchema", "addRecordTimestamp", "emitConsumerLagMetrics")) {
      String value = options.get(flagName);
      if (value != null && !value.equals("true") && !value.equals("false")) {
        throw new IllegalArgumentException(source + " source: " + flagName + " is " + value + ", not 'true' or 'false'");
      }
    }
  }

  private static String required(Map<String, String> options, String name, String source) {
    String value = options.get(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(source + " source: option " + name + " is required");
    }
    return value;
  }

  private static boolean flag(Map<String, String> options, String name) {
    return "true".equals(options.get(name));
  }

  @SuppressWarnings("unchecked")
  private static StructType columns(Map<String, Object> entry) {
    StructType schema = new StructType();
    for (Object column : (List<Object>) entry.get("columns")) {
      List<Object> pair = (List<Object>) column;
      schema = schema.add(String.valueOf(pair.get(0)), String.valueOf(pair.get(1)));
    }
    return schema;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object value) {
    return (Map<String, Object>) value;
  }

  private static Set<String> set(String... names) {
    return new HashSet<>(Arrays.asList(names));
  }

  /** What getCatalogSource returns; awsglue/streaming_data_source.py calls getDataFrame() on it. */
  public static final class StreamingCatalogSource {
    private final Dataset<Row> frame;

    StreamingCatalogSource(Dataset<Row> frame) {
      this.frame = frame;
    }

    public Dataset<Row> getDataFrame() {
      return frame;
    }
  }
}

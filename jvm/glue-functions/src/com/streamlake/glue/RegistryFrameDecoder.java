package com.streamlake.glue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.util.Utf8;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * A Kafka record's value framed by the AWS Glue Schema Registry serializer -> the record as the dataset's JSON.
 *
 * <p>The frame (awslabs/aws-glue-schema-registry, docs/kafka.md "Frames" cites it): byte 0 the header version 3,
 * byte 1 the compression (0 none, 5 zlib), bytes 2-17 the writer's schema version UUID (most significant
 * bits first), then the Avro binary body, zlib-deflated as a whole when byte 1 is 5. The body is read with the
 * writer's schema and resolved to the dataset's newest (Avro schema resolution), and must end exactly where the
 * record ends.
 *
 * <p>Returns struct&lt;reason, detail, payload, schema_version, record&gt;: payload is the decoded record (reason null) rendered as
 * the dataset's JSON records are (decimal a plain number, enum a string, date YYYY-MM-DD, timestamps epoch
 * numbers), or the value's bytes as base64 with the reason malformed_record / unknown_schema_version and a detail
 * (malformed_record also for a string whose bytes are not UTF-8: strings are decoded strictly, never with U+FFFD);
 * schema_version is the frame's
 * UUID whenever the header could be read, so the driver can look an unknown one up and decode again.
 *
 * <p>record (when the function is built with typedRecords) is the same record as Spark values in the shape of the
 * contract's plain JSON parse (glue_jobs/typed_parse.wire_type(root, "")): a record a Row, an array an Object[], a
 * map a LinkedHashMap, a decimal a BigDecimal, a date its YYYY-MM-DD text, a timestamp its epoch number. It lets the
 * contract skip parsing the payload. It is null whenever that shape cannot hold the value exactly (NaN or an
 * infinity, a decimal with more integer digits than its precision allows, bytes that are no decimal): the contract
 * then validates the payload as it validates any JSON record, so nothing depends on this shortcut but speed.
 *
 * <p>Constructed on the driver with every writer version known (UUID -> schema text) and the newest schema;
 * Spark serializes the function to the executors, which parse the schemas once per JVM. Compiled for Java 8,
 * AWS Glue 4.0's runtime; it needs only Avro and Spark's Java UDF API, both on every Spark line's classpath.
 */
public final class RegistryFrameDecoder implements UDF1<byte[], Row> {
    private static final long serialVersionUID = 1L;
    public static final String MALFORMED = "malformed_record";
    public static final String UNKNOWN_VERSION = "unknown_schema_version";
    static final byte HEADER_VERSION = 3;
    static final byte NO_COMPRESSION = 0;
    static final byte ZLIB = 5;
    static final int HEADER_BYTES = 18;
    /** Inflated bodies larger than this are refused (a frame that inflates without bound is not a record). */
    static final int MAX_INFLATED_BYTES = 64 * 1024 * 1024;

    private final HashMap<String, String> writerSchemas;
    private final String readerSchema;
    private final HashMap<String, String> unknownDetails;
    private final boolean typedRecords;
    private transient Map<String, GenericDatumReader<Object>> readers;
    private transient Schema reader;

    /**
     * @param writerSchemas every known writer version: its registry UUID -> its Avro schema text
     * @param readerSchema the dataset's newest schema, every record's resolved shape
     * @param unknownDetails UUIDs the driver looked up and cannot use -> why (part of their dead letters' detail)
     */
    public RegistryFrameDecoder(Map<String, String> writerSchemas, String readerSchema, Map<String, String> unknownDetails) {
        this(writerSchemas, readerSchema, unknownDetails, false);
    }

    /** @param typedRecords whether each decoded record is also returned as Spark values (the record field) */
    public RegistryFrameDecoder(Map<String, String> writerSchemas, String readerSchema, Map<String, String> unknownDetails,
                                boolean typedRecords) {
        this.typedRecords = typedRecords;
        this.writerSchemas = new HashMap<String, String>(writerSchemas);
        this.readerSchema = readerSchema;
        this.unknownDetails = new HashMap<String, String>(unknownDetails);
    }

    private GenericDatumReader<Object> readerFor(String version) {
        if (readers == null) {
            readers = new HashMap<String, GenericDatumReader<Object>>();
            reader = new Schema.Parser().parse(readerSchema);
        }
        GenericDatumReader<Object> found = readers.get(version);
        if (found == null && writerSchemas.containsKey(version)) {
            Schema writer = new Schema.Parser().parse(writerSchemas.get(version));
            found = new GenericDatumReader<Object>(writer, reader) {
                @Override
                protected Object newMap(Object old, int size) {
                    // Avro's default, a HashMap, would render a map's keys in hash order: keep the order written.
                    return new java.util.LinkedHashMap<Object, Object>(Math.max(16, size * 2));
                }
            };
            readers.put(version, found);
        }
        return found;
    }

    /** A value that cannot be decoded: its bytes as base64 (one line, no MIME breaks) are its dead letter's payload. */
    private static Row problem(byte[] value, String reason, String detail, String version) {
        String payload = value == null ? null : java.util.Base64.getEncoder().encodeToString(value);
        return RowFactory.create(reason, detail, payload, version, null);
    }

    @Override
    public Row call(byte[] value) {
        if (value == null) {
            return problem(value, MALFORMED, "the record has no value (a null value or tombstone)", null);
        }
        if (value.length > 0 && value[0] == 0) {
            return problem(value, MALFORMED, "a Confluent-style frame (magic byte 0), not a Glue Schema Registry frame (header version 3)", null);
        }
        if (value.length < HEADER_BYTES) {
            return problem(value, MALFORMED, "the value is " + value.length + " bytes, shorter than the 18-byte Glue Schema Registry header", null);
        }
        if (value[0] != HEADER_VERSION) {
            return problem(value, MALFORMED, "header version byte is " + (value[0] & 0xff) + ", not 3 (not a Glue Schema Registry frame)", null);
        }
        byte compression = value[1];
        if (compression != NO_COMPRESSION && compression != ZLIB) {
            return problem(value, MALFORMED, "compression byte is " + (compression & 0xff) + ", not 0 (none) or 5 (zlib)", null);
        }
        ByteBuffer id = ByteBuffer.wrap(value, 2, 16);
        String version = new UUID(id.getLong(), id.getLong()).toString();
        GenericDatumReader<Object> datumReader = readerFor(version);
        if (datumReader == null) {
            String why = unknownDetails.get(version);
            return problem(value, UNKNOWN_VERSION, "schema version " + version + " is not a version this job can read"
                    + (why == null ? "" : ": " + why), version);
        }
        byte[] body;
        int offset;
        int length;
        if (compression == ZLIB) {
            try {
                body = inflate(value, HEADER_BYTES, value.length - HEADER_BYTES);
            } catch (DataFormatException | IOException e) {
                return problem(value, MALFORMED, "zlib body cannot be inflated: " + e.getMessage(), version);
            }
            offset = 0;
            length = body.length;
        } else {
            body = value;
            offset = HEADER_BYTES;
            length = value.length - HEADER_BYTES;
        }
        Object datum;
        BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(body, offset, length, null);
        try {
            datum = datumReader.read(null, decoder);
        } catch (IOException | RuntimeException e) {
            String what = e.getMessage() == null ? e.getClass().getSimpleName() : e.getClass().getSimpleName() + ": " + e.getMessage();
            return problem(value, MALFORMED, "the Avro body is not a record of schema version " + version + " (" + clip(what) + ")", version);
        }
        try {
            if (!decoder.isEnd()) {
                return problem(value, MALFORMED, "bytes after the end of the Avro record of schema version " + version, version);
            }
        } catch (IOException e) {
            return problem(value, MALFORMED, "the Avro body cannot be read to its end: " + clip(e.getMessage()), version);
        }
        StringBuilder json = new StringBuilder(length * 2 + 16);
        try {
            render(json, reader, datum);
        } catch (NotUtf8 e) {
            return problem(value, MALFORMED, "a string of the Avro record of schema version " + version + " is not valid UTF-8 ("
                    + clip(e.getMessage()) + "); the value's bytes are kept as sent", version);
        } catch (RuntimeException e) {  // a decimal's bytes that are no integer (empty), a date beyond LocalDate
            return problem(value, MALFORMED, "the Avro record of schema version " + version + " has a value its type cannot hold ("
                    + clip(e.getClass().getSimpleName() + ": " + e.getMessage()) + ")", version);
        }
        return RowFactory.create(null, null, json.toString(), version, typedRecords ? typedOrNull(reader, datum) : null);
    }

    /** A string whose bytes are not UTF-8: Avro's Utf8.toString() would put U+FFFD in their place, and the record would
     * be stored with a value its producer never sent; the record is a dead letter with its bytes instead. */
    static final class NotUtf8 extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotUtf8(String message) {
            super(message, null, false, false);
        }
    }

    private static final ThreadLocal<CharsetDecoder> STRICT_UTF8 = new ThreadLocal<CharsetDecoder>() {
        @Override
        protected CharsetDecoder initialValue() {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT);
        }
    };

    /** An Avro string's text, decoded strictly (NotUtf8 for bytes that are not UTF-8). */
    static String utf8(Object datum) {
        if (!(datum instanceof Utf8)) {
            return datum.toString();
        }
        Utf8 text = (Utf8) datum;
        try {
            return STRICT_UTF8.get().decode(ByteBuffer.wrap(text.getBytes(), 0, text.getByteLength())).toString();
        } catch (CharacterCodingException e) {
            throw new NotUtf8(e.getClass().getSimpleName() + " in a string of " + text.getByteLength() + " bytes");
        }
    }

    /** Thrown where the plain-parse shape cannot hold a value exactly; the record is then validated from its JSON. */
    private static final class NotExact extends Exception {
        private static final long serialVersionUID = 1L;

        NotExact() {
            super(null, null, false, false);
        }
    }

    private static final NotExact NOT_EXACT = new NotExact();

    static Object typedOrNull(Schema schema, Object datum) {
        try {
            return typed(schema, datum);
        } catch (NotExact | RuntimeException e) {
            return null;
        }
    }

    /** The datum as Spark values in the plain-parse shape (see the class doc). */
    static Object typed(Schema schema, Object datum) throws NotExact {
        if (datum == null) {
            return null;
        }
        LogicalType logical = schema.getLogicalType();
        switch (schema.getType()) {
            case UNION:
                return typed(schema.getTypes().get(GenericData.get().resolveUnion(schema, datum)), datum);
            case RECORD: {
                IndexedRecord record = (IndexedRecord) datum;
                List<Schema.Field> fields = schema.getFields();
                Object[] values = new Object[fields.size()];
                for (int i = 0; i < values.length; i++) {
                    values[i] = typed(fields.get(i).schema(), record.get(i));
                }
                return RowFactory.create(values);
            }
            case ARRAY: {
                java.util.Collection<?> items = (java.util.Collection<?>) datum;
                Object[] values = new Object[items.size()];
                int i = 0;
                for (Object item : items) {
                    values[i++] = typed(schema.getElementType(), item);
                }
                return values;
            }
            case MAP: {
                Map<?, ?> entries = (Map<?, ?>) datum;
                Map<String, Object> values = new java.util.LinkedHashMap<String, Object>(Math.max(16, entries.size() * 2));
                for (Map.Entry<?, ?> entry : entries.entrySet()) {
                    values.put(entry.getKey().toString(), typed(schema.getValueType(), entry.getValue()));
                }
                return values;
            }
            case ENUM:
            case STRING:
                return datum.toString();
            case BOOLEAN:
                return datum;
            case INT:
                return logical instanceof LogicalTypes.Date ? LocalDate.ofEpochDay(((Integer) datum).longValue()).toString() : datum;
            case LONG:
                return datum;
            case FLOAT:
                if (Float.isNaN((Float) datum) || Float.isInfinite((Float) datum)) {
                    throw NOT_EXACT;
                }
                return datum;
            case DOUBLE:
                if (Double.isNaN((Double) datum) || Double.isInfinite((Double) datum)) {
                    throw NOT_EXACT;
                }
                return datum;
            case BYTES: {
                ByteBuffer buffer = ((ByteBuffer) datum).duplicate();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                return decimal(logical, bytes);
            }
            case FIXED:
                return decimal(logical, ((GenericFixed) datum).bytes());
            default:
                throw NOT_EXACT;
        }
    }

    /** A decimal's value, when its integer digits fit its declared precision (the wide parse keeps the same ones). */
    private static BigDecimal decimal(LogicalType logical, byte[] bytes) throws NotExact {
        if (!(logical instanceof LogicalTypes.Decimal) || bytes.length == 0) {
            throw NOT_EXACT;
        }
        LogicalTypes.Decimal declared = (LogicalTypes.Decimal) logical;
        BigDecimal value = new BigDecimal(new BigInteger(bytes), declared.getScale());
        if (value.precision() - value.scale() > declared.getPrecision() - declared.getScale()) {
            throw NOT_EXACT;
        }
        return value;
    }

    private static String clip(String text) {
        return text == null || text.length() <= 200 ? text : text.substring(0, 200) + "...";
    }

    static byte[] inflate(byte[] data, int offset, int length) throws DataFormatException, IOException {
        Inflater inflater = new Inflater();
        try {
            inflater.setInput(data, offset, length);
            ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(64, length * 4));
            byte[] buffer = new byte[8192];
            while (!inflater.finished()) {
                int n = inflater.inflate(buffer);
                if (n == 0 && (inflater.needsInput() || inflater.needsDictionary())) {
                    throw new DataFormatException("the zlib stream ends early");
                }
                out.write(buffer, 0, n);
                if (out.size() > MAX_INFLATED_BYTES) {
                    throw new DataFormatException("inflates past " + MAX_INFLATED_BYTES + " bytes");
                }
            }
            if (inflater.getRemaining() > 0) {
                throw new DataFormatException(inflater.getRemaining() + " bytes after the zlib stream");
            }
            return out.toByteArray();
        } finally {
            inflater.end();
        }
    }

    /** The datum as the dataset's JSON: what glue_jobs/contract/typed_contract.py reads from a JSON record. */
    static void render(StringBuilder out, Schema schema, Object datum) {
        if (datum == null) {
            out.append("null");
            return;
        }
        LogicalType logical = schema.getLogicalType();
        switch (schema.getType()) {
            case UNION:
                render(out, schema.getTypes().get(GenericData.get().resolveUnion(schema, datum)), datum);
                return;
            case RECORD: {
                IndexedRecord record = (IndexedRecord) datum;
                out.append('{');
                List<Schema.Field> fields = schema.getFields();
                for (int i = 0; i < fields.size(); i++) {
                    if (i > 0) {
                        out.append(',');
                    }
                    string(out, fields.get(i).name());
                    out.append(':');
                    render(out, fields.get(i).schema(), record.get(i));
                }
                out.append('}');
                return;
            }
            case ARRAY: {
                out.append('[');
                boolean first = true;
                for (Object item : (java.util.Collection<?>) datum) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    render(out, schema.getElementType(), item);
                }
                out.append(']');
                return;
            }
            case MAP: {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : ((Map<?, ?>) datum).entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    string(out, utf8(entry.getKey()));
                    out.append(':');
                    render(out, schema.getValueType(), entry.getValue());
                }
                out.append('}');
                return;
            }
            case ENUM:
                string(out, datum.toString());
                return;
            case STRING:
                string(out, utf8(datum));
                return;
            case BOOLEAN:
                out.append(((Boolean) datum).booleanValue() ? "true" : "false");
                return;
            case INT:
                if (logical instanceof LogicalTypes.Date) {
                    out.append('"').append(LocalDate.ofEpochDay(((Integer) datum).longValue())).append('"');
                } else {
                    out.append(((Integer) datum).intValue());
                }
                return;
            case LONG:
                out.append(((Long) datum).longValue());
                return;
            case FLOAT:
                finite(out, ((Float) datum).doubleValue(), Float.toString((Float) datum), "1e39");
                return;
            case DOUBLE:
                finite(out, (Double) datum, Double.toString((Double) datum), "1e400");
                return;
            case BYTES: {
                ByteBuffer buffer = ((ByteBuffer) datum).duplicate();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                bytes(out, logical, bytes);
                return;
            }
            case FIXED:
                bytes(out, logical, ((GenericFixed) datum).bytes());
                return;
            default:
                throw new IllegalArgumentException("no JSON rendering for Avro type " + schema.getType());
        }
    }

    /**
     * NaN and the infinities are no JSON numbers, and Avro carries them; the dataset refuses them (out_of_range).
     * Rendered as a number beyond the type's range, the contract names the field and the reason as it does for
     * such a number in a JSON record, where the bare token NaN would make the whole record malformed JSON.
     */
    private static void finite(StringBuilder out, double value, String text, String beyondRange) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            out.append(value < 0 ? "-" : "").append(beyondRange);
        } else {
            out.append(text);
        }
    }

    private static void bytes(StringBuilder out, LogicalType logical, byte[] bytes) {
        if (logical instanceof LogicalTypes.Decimal) {
            int scale = ((LogicalTypes.Decimal) logical).getScale();
            out.append(new BigDecimal(new BigInteger(bytes), scale).toPlainString());
        } else {
            string(out, java.util.Base64.getEncoder().encodeToString(bytes));
        }
    }

    static void string(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}

package com.streamlake.glue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A JSON record's payload -> the record in the shape of the typed contract's plain parse
 * (glue_jobs/typed_parse.wire_type(root, "")), or null when this function cannot prove that shape holds the record
 * exactly as written. It is the typed contract's fast path (glue_jobs/contract/typed_contract.py) where the jar is on the
 * classpath; glue_jobs/contract/typed_screen.py proves the same with Spark expressions where it is not.
 *
 * <p>It reads the payload once with Jackson's streaming parser (the parser Spark's own JSON functions use) and
 * answers a value only when every token has the JSON type its field declares, with nothing coerced: a string field
 * holds a string token, a boolean true or false, an int or long an integer token within its range, a float or double a
 * number token with a finite value, a decimal a number token its declared precision and scale hold exactly, a record
 * an object whose keys are its fields, each once, a map an object whose keys are distinct, an array an array; and a
 * value for every required field, array element and map value (not null, not absent). JSON null is null where the type
 * allows it. A json_text field holds any JSON value and is answered as its JSON text ({@link #jsonText}). The
 * payload must be exactly one object, written from its first to its last character. Anything else (an
 * unknown or repeated key, a value of another JSON type, syntax, text after the object, a required value missing, an
 * inexact decimal) answers null: the record then takes the strict path, which finds its
 * reason and field path; so the result never decides validity by itself. What it answers carries the guarantees of
 * a record the Kafka decoder typed (RegistryFrameDecoder), and it also makes the checks the contract makes on such a
 * record (typed_checks.suspect with decoded=True), each at the field paths the dataset's value checks name: a required
 * string is not blank, an enum's value after its normalize steps is one of its symbols, a date is a calendar day
 * written YYYY-MM-DD, a timestamp number lies in Spark's range; so a record it answers needs no further type check.
 * It is stricter than those checks where matching Spark exactly would be subtle (a non-ASCII value to lower or upper
 * case, a date with anything but its ten characters): such a record takes the strict path. The values are those
 * Spark's plain parse gives for the same tokens
 * (its JacksonParser: getText, getIntValue, getLongValue, getFloatValue, getDoubleValue, getDecimalValue), as Java
 * values its UDF API converts: a record a Row, an array an Object[], a map a LinkedHashMap, a decimal a BigDecimal.
 *
 * <p>Constructed on the driver with the dataset's schema as a Spark type (glue_jobs/contract/strict_json.py: a field, element
 * or map value that is not nullable is required; decimals with their declared precision and scale) and the dataset's
 * json_text field paths ("a.b", "items[]") and value checks (glue_jobs/strict_json.value_checks: one line per field
 * path); Spark serializes the function to the executors, which build the readers
 * once per instance.
 * Compiled for Java 8 against Spark's Java UDF API and jackson-core, both on every Spark line's classpath.
 */
public final class StrictJsonRecord implements UDF1<String, Row> {
    private static final long serialVersionUID = 1L;
    private static final JsonFactory FACTORY = new JsonFactory();
    private static final NotProven NOT_PROVEN = new NotProven();

    private final String typeJson;
    private final String jsonTextPaths;
    private final String valueChecks;
    private transient volatile Reader root;

    /**
     * @param typeJson the dataset's schema as a Spark type's JSON (see the class doc)
     * @param jsonTextPaths the json_text field paths, '\n'-separated ("" for none)
     * @param valueChecks the value checks, one '\n'-separated line per field path (see {@link #checks})
     */
    public StrictJsonRecord(String typeJson, String jsonTextPaths, String valueChecks) {
        this.typeJson = typeJson;
        this.jsonTextPaths = jsonTextPaths;
        this.valueChecks = valueChecks;
        reader();  // a type this class cannot read fails here, on the driver
    }

    @Override
    public Row call(String text) {
        int length = text == null ? 0 : text.length();
        if (length < 2 || text.charAt(0) != '{' || text.charAt(length - 1) != '}') {
            return null;
        }
        Reader reader = reader();
        try {
            JsonParser parser = FACTORY.createParser(text);
            try {
                if (parser.nextToken() != JsonToken.START_OBJECT) {
                    return null;
                }
                Row row = (Row) reader.read(parser);
                return parser.nextToken() == null ? row : null;
            } finally {
                parser.close();
            }
        } catch (NotProven | IOException | RuntimeException e) {
            return null;
        }
    }

    private Reader reader() {
        Reader built = root;
        if (built == null) {
            Set<String> texts = new HashSet<String>();
            for (String path : jsonTextPaths.split("\n")) {
                if (!path.isEmpty()) {
                    texts.add(path);
                }
            }
            DataType type = DataType.fromJson(typeJson);
            if (!(type instanceof StructType)) {
                throw new IllegalArgumentException("the record type is not a struct: " + typeJson);
            }
            built = root = reader(type, "", texts, checks(valueChecks));
        }
        return built;
    }

    /**
     * The value checks by field path. A line is tab-separated: {@code text <path> <required 0|1> <date 0|1>
     * <normalize steps, comma-separated> <enum symbols, comma-separated, empty when not an enum>} for a string, enum or
     * date, or {@code range <path> <lowest> <highest>} for a timestamp number.
     */
    static Map<String, String[]> checks(String lines) {
        Map<String, String[]> checks = new HashMap<String, String[]>();
        for (String line : lines.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            int expected = "text".equals(parts[0]) ? 6 : "range".equals(parts[0]) ? 4 : -1;
            if (parts.length != expected || checks.put(parts[1], parts) != null) {
                throw new IllegalArgumentException("bad value check line: " + line);
            }
        }
        return checks;
    }

    private static Reader reader(DataType type, String path, Set<String> texts, Map<String, String[]> checks) {
        String[] check = checks.get(path);
        if (check == null) {
            return plainReader(type, path, texts, checks);
        }
        if ("text".equals(check[0]) && type instanceof StringType) {
            return new CheckedString(check);
        }
        if ("range".equals(check[0]) && type instanceof LongType) {
            return new RangeLong(Long.parseLong(check[2]), Long.parseLong(check[3]));
        }
        throw new IllegalArgumentException("value check " + check[0] + " on " + type.simpleString() + " at " + path);
    }

    private static Reader plainReader(DataType type, String path, Set<String> texts, Map<String, String[]> checks) {
        if (type instanceof StructType) {
            StructField[] fields = ((StructType) type).fields();
            Reader[] readers = new Reader[fields.length];
            boolean[] text = new boolean[fields.length];
            boolean[] required = new boolean[fields.length];
            Map<String, Integer> index = new HashMap<String, Integer>();
            for (int i = 0; i < fields.length; i++) {
                String child = path.isEmpty() ? fields[i].name() : path + "." + fields[i].name();
                readers[i] = reader(fields[i].dataType(), child, texts, checks);
                text[i] = texts.contains(child);
                required[i] = !fields[i].nullable();
                index.put(fields[i].name(), i);
            }
            return new RecordReader(readers, text, required, index);
        }
        if (type instanceof ArrayType) {
            ArrayType array = (ArrayType) type;
            return new ArrayReader(reader(array.elementType(), path + "[]", texts, checks), !array.containsNull());
        }
        if (type instanceof MapType) {
            MapType map = (MapType) type;
            if (!(map.keyType() instanceof StringType)) {
                throw new IllegalArgumentException("a map's keys are not strings at " + path);
            }
            return new MapReader(reader(map.valueType(), path + "[]", texts, checks), !map.valueContainsNull());
        }
        if (type instanceof DecimalType) {
            return new DecimalReader(((DecimalType) type).precision(), ((DecimalType) type).scale());
        }
        if (type instanceof StringType) {
            return SCALAR_STRING;
        }
        if (type instanceof BooleanType) {
            return SCALAR_BOOLEAN;
        }
        if (type instanceof IntegerType) {
            return SCALAR_INT;
        }
        if (type instanceof LongType) {
            return SCALAR_LONG;
        }
        if (type instanceof FloatType) {
            return SCALAR_FLOAT;
        }
        if (type instanceof DoubleType) {
            return SCALAR_DOUBLE;
        }
        throw new IllegalArgumentException("no strict reader for " + type.simpleString() + " at " + path);
    }

    /** Reads one non-null value whose first token is the parser's current one. */
    private interface Reader {
        Object read(JsonParser parser) throws IOException, NotProven;
    }

    private static Object value(Reader reader, JsonParser parser, boolean required) throws IOException, NotProven {
        if (parser.currentToken() == JsonToken.VALUE_NULL) {
            if (required) {
                throw NOT_PROVEN;
            }
            return null;
        }
        return reader.read(parser);
    }

    private static final Reader SCALAR_STRING = new Reader() {
        public Object read(JsonParser parser) throws IOException, NotProven {
            if (parser.currentToken() != JsonToken.VALUE_STRING) {
                throw NOT_PROVEN;
            }
            return parser.getText();
        }
    };

    private static final Reader SCALAR_BOOLEAN = new Reader() {
        public Object read(JsonParser parser) throws NotProven {
            JsonToken token = parser.currentToken();
            if (token == JsonToken.VALUE_TRUE) {
                return Boolean.TRUE;
            }
            if (token == JsonToken.VALUE_FALSE) {
                return Boolean.FALSE;
            }
            throw NOT_PROVEN;
        }
    };

    private static final Reader SCALAR_INT = new Reader() {
        public Object read(JsonParser parser) throws IOException, NotProven {
            if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT || parser.getNumberType() != JsonParser.NumberType.INT) {
                throw NOT_PROVEN;
            }
            return parser.getIntValue();
        }
    };

    private static final Reader SCALAR_LONG = new Reader() {
        public Object read(JsonParser parser) throws IOException, NotProven {
            if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT) {
                throw NOT_PROVEN;
            }
            JsonParser.NumberType kind = parser.getNumberType();
            if (kind != JsonParser.NumberType.INT && kind != JsonParser.NumberType.LONG) {
                throw NOT_PROVEN;
            }
            return parser.getLongValue();
        }
    };

    private static boolean isNumber(JsonToken token) {
        return token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT;
    }

    private static final Reader SCALAR_FLOAT = new Reader() {
        public Object read(JsonParser parser) throws IOException, NotProven {
            if (!isNumber(parser.currentToken())) {
                throw NOT_PROVEN;
            }
            float value = parser.getFloatValue();
            if (Float.isNaN(value) || Float.isInfinite(value)) {
                throw NOT_PROVEN;
            }
            return value;
        }
    };

    private static final Reader SCALAR_DOUBLE = new Reader() {
        public Object read(JsonParser parser) throws IOException, NotProven {
            if (!isNumber(parser.currentToken())) {
                throw NOT_PROVEN;
            }
            double value = parser.getDoubleValue();
            if (Double.isNaN(value) || Double.isInfinite(value)) {
                throw NOT_PROVEN;
            }
            return value;
        }
    };

    /** Java's \\s characters, which typed_checks.is_blank and its trim step know as blank. */
    private static boolean isSpace(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\u000B' || c == '\f' || c == '\r';
    }

    /** A string token that typed_checks.suspect(decoded=True) would not flag (see {@link #checks}). */
    private static final class CheckedString implements Reader {
        private final boolean required;
        private final boolean date;
        private final String[] normalize;
        private final Set<String> symbols;

        CheckedString(String[] check) {
            required = "1".equals(check[2]);
            date = "1".equals(check[3]);
            normalize = check[4].isEmpty() ? new String[0] : check[4].split(",");
            symbols = check[5].isEmpty() ? null : new HashSet<String>(Arrays.asList(check[5].split(",")));
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            String text = (String) SCALAR_STRING.read(parser);
            if (required && isBlank(text) || date && !isDate(text) || symbols != null && !symbols.contains(normalized(text))) {
                throw NOT_PROVEN;
            }
            return text;
        }

        private static boolean isBlank(String text) {
            for (int i = 0; i < text.length(); i++) {
                if (!isSpace(text.charAt(i))) {
                    return false;
                }
            }
            return true;
        }

        /** YYYY-MM-DD naming a day of the proleptic Gregorian calendar, years 1-9999 (typed_checks.valid_date). */
        private static boolean isDate(String text) {
            if (text.length() != 10 || text.charAt(4) != '-' || text.charAt(7) != '-') {
                return false;
            }
            for (int i = 0; i < 10; i++) {
                if (i != 4 && i != 7 && (text.charAt(i) < '0' || text.charAt(i) > '9')) {
                    return false;
                }
            }
            int year = Integer.parseInt(text.substring(0, 4));
            int month = Integer.parseInt(text.substring(5, 7));
            int day = Integer.parseInt(text.substring(8, 10));
            boolean leap = year % 4 == 0 && year % 100 != 0 || year % 400 == 0;
            int days = month == 2 ? (leap ? 29 : 28) : month == 4 || month == 6 || month == 9 || month == 11 ? 30 : 31;
            return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= days;
        }

        /** The value after the normalize steps; null (no symbol) where a case step meets a non-ASCII character. */
        private String normalized(String text) {
            String value = text;
            for (String step : normalize) {
                if ("trim".equals(step)) {
                    int start = 0;
                    int end = value.length();
                    while (start < end && isSpace(value.charAt(start))) {
                        start++;
                    }
                    while (end > start && isSpace(value.charAt(end - 1))) {
                        end--;
                    }
                    value = value.substring(start, end);
                } else {
                    for (int i = 0; i < value.length(); i++) {
                        if (value.charAt(i) > 127) {
                            return null;  // Spark's case mapping of other characters is not copied here
                        }
                    }
                    value = "lower".equals(step) ? value.toLowerCase(Locale.ROOT) : value.toUpperCase(Locale.ROOT);
                }
            }
            return value;
        }
    }

    /** A timestamp number within Spark's range (typed_checks._INTEGER_BOUNDS). */
    private static final class RangeLong implements Reader {
        private final long lowest;
        private final long highest;

        RangeLong(long lowest, long highest) {
            this.lowest = lowest;
            this.highest = highest;
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            long value = (Long) SCALAR_LONG.read(parser);
            if (value < lowest || value > highest) {
                throw NOT_PROVEN;
            }
            return value;
        }
    }

    private static final class DecimalReader implements Reader {
        private final int precision;
        private final int scale;

        DecimalReader(int precision, int scale) {
            this.precision = precision;
            this.scale = scale;
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            if (!isNumber(parser.currentToken())) {
                throw NOT_PROVEN;
            }
            BigDecimal value = InexactDecimal.scaled(parser.getDecimalValue(), precision, scale);
            if (value == null) {
                throw NOT_PROVEN;  // more fraction digits than the scale, or more integer digits than the type holds
            }
            return value;
        }
    }

    private static final class RecordReader implements Reader {
        private final Reader[] fields;
        private final boolean[] jsonText;
        private final boolean[] required;
        private final Map<String, Integer> index;

        RecordReader(Reader[] fields, boolean[] jsonText, boolean[] required, Map<String, Integer> index) {
            this.fields = fields;
            this.jsonText = jsonText;
            this.required = required;
            this.index = index;
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            ContainerReader.expect(parser, JsonToken.START_OBJECT);
            Object[] values = new Object[fields.length];
            boolean[] seen = new boolean[fields.length];
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                Integer at = index.get(parser.getCurrentName());
                if (at == null || seen[at]) {
                    throw NOT_PROVEN;  // a key the record does not declare, or a repeated one
                }
                seen[at] = true;
                parser.nextToken();
                values[at] = jsonText[at] && parser.currentToken() != JsonToken.VALUE_NULL ? jsonText(parser)
                        : value(fields[at], parser, required[at]);
            }
            if (token != JsonToken.END_OBJECT) {
                throw NOT_PROVEN;
            }
            for (int i = 0; i < values.length; i++) {
                if (required[i] && values[i] == null) {
                    throw NOT_PROVEN;  // absent
                }
            }
            return RowFactory.create(values);
        }
    }

    /**
     * A json_text field's value (any JSON value; the parser on its first token) as the JSON text the strict path
     * stores (glue_jobs/contract/typed_contract.py): a string token as {@code to_json} writes a string (Spark's StructsToJson: a
     * generator over a character writer), any other value as Spark's parse renders a non-string token into a string
     * field (apache/spark JacksonParser, StringType: {@code copyCurrentStructure} into a UTF-8 generator over bytes).
     * Both are Jackson generators from a default factory, as Spark's are (Spark configures only read features);
     * tests/spark/test_typed_screen.py compares the two paths' texts on every Spark line.
     */
    private static String jsonText(JsonParser parser) throws IOException {
        if (parser.currentToken() == JsonToken.VALUE_STRING) {
            StringWriter out = new StringWriter();
            JsonGenerator generator = FACTORY.createGenerator(out);
            try {
                generator.writeString(parser.getText());
            } finally {
                generator.close();
            }
            return out.toString();
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        JsonGenerator generator = FACTORY.createGenerator(out, JsonEncoding.UTF8);
        try {
            generator.copyCurrentStructure(parser);
        } finally {
            generator.close();
        }
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }

    /** An array's elements or a map's values: each read by {@code items}, required or not. */
    private abstract static class ContainerReader implements Reader {
        final Reader items;
        final boolean required;

        ContainerReader(Reader items, boolean required) {
            this.items = items;
            this.required = required;
        }

        static void expect(JsonParser parser, JsonToken token) throws NotProven {
            if (parser.currentToken() != token) {
                throw NOT_PROVEN;
            }
        }
    }

    private static final class ArrayReader extends ContainerReader {
        ArrayReader(Reader items, boolean required) {
            super(items, required);
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            expect(parser, JsonToken.START_ARRAY);
            List<Object> values = new ArrayList<Object>();
            while (parser.nextToken() != JsonToken.END_ARRAY) {
                if (parser.currentToken() == null) {
                    throw NOT_PROVEN;
                }
                values.add(value(items, parser, required));
            }
            return values.toArray();
        }
    }

    private static final class MapReader extends ContainerReader {
        MapReader(Reader values, boolean required) {
            super(values, required);
        }

        public Object read(JsonParser parser) throws IOException, NotProven {
            expect(parser, JsonToken.START_OBJECT);
            Map<String, Object> entries = new LinkedHashMap<String, Object>();
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                String key = parser.getCurrentName();
                if (entries.containsKey(key)) {
                    throw NOT_PROVEN;  // a repeated key
                }
                parser.nextToken();
                entries.put(key, value(items, parser, required));
            }
            if (token != JsonToken.END_OBJECT) {
                throw NOT_PROVEN;
            }
            return entries;
        }
    }

    /** The record is not proven to be exactly its plain parse (no stack trace: it is a verdict, not an error). */
    private static final class NotProven extends Exception {
        private static final long serialVersionUID = 1L;

        NotProven() {
            super(null, null, false, false);
        }
    }
}

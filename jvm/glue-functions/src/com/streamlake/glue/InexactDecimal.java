package com.streamlake.glue;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A JSON record's payload -> the detail path of its first decimal number (in the order written) that its declared
 * precision and scale do not hold exactly, or null when there is none (or the payload does not parse).
 *
 * <p>The typed contract's strict path parses decimals with Spark's {@code from_json} in a wide type (38 digits), which
 * rounds fraction digits beyond that type's scale away, and its diagnosis reads a number's text as Spark renders it
 * (through a double), which hides digits beyond a double's: so {@code 1.0000000000000000000000000000001} for a
 * decimal(10,2) parsed as 1.00 and was stored, and a value with 30 fraction digits was dead-lettered without its path.
 * This function reads the number as written (Jackson's {@code getDecimalValue}; that Spark's parser rounds this value to
 * the type's scale is what tests/spark/test_typed_contract.py's strictness rows showed on 3.3, 3.5 and 4.1, and
 * unverified against apache/spark's JacksonParser source) and is asked only about records the JVM proof
 * ({@link StrictJsonRecord}) did not answer (glue_jobs/contract/typed_contract.py). The path is written as the diagnosis
 * writes it (glue_jobs/typed_checks.diagnose): {@code total}, {@code shipping.fee}, {@code items[3].unit_price}
 * (array indexes from 0), {@code prices["EUR"]}. Everything but decimal numbers at the schema's decimal fields is
 * skipped: the strict path finds those problems.
 *
 * <p>Constructed on the driver with the schema as a Spark type's JSON (glue_jobs/strict_json.spec_type: decimals
 * with their declared precision and scale). Compiled for Java 8 like {@link StrictJsonRecord}.
 */
public final class InexactDecimal implements UDF1<String, String> {
    private static final long serialVersionUID = 1L;
    private static final JsonFactory FACTORY = new JsonFactory();

    private final String typeJson;
    private transient volatile StructType root;

    /** @param typeJson the dataset's schema as a Spark type's JSON (see the class doc) */
    public InexactDecimal(String typeJson) {
        this.typeJson = typeJson;
        root();  // a schema that is not a struct fails here, on the driver
    }

    @Override
    public String call(String text) {
        if (text == null) {
            return null;
        }
        try {
            JsonParser parser = FACTORY.createParser(text);
            try {
                if (parser.nextToken() != JsonToken.START_OBJECT) {
                    return null;
                }
                return find(root(), parser, "");
            } finally {
                parser.close();
            }
        } catch (IOException | RuntimeException e) {
            return null;  // not JSON: the strict path names it malformed
        }
    }

    private StructType root() {
        StructType built = root;
        if (built == null) {
            DataType type = DataType.fromJson(typeJson);
            if (!(type instanceof StructType)) {
                throw new IllegalArgumentException("the record type is not a struct: " + typeJson);
            }
            built = root = (StructType) type;
        }
        return built;
    }

    /** The first inexact decimal's path in the value whose first token is the current one, or null; the parser is
     * left on the value's last token. */
    private static String find(DataType type, JsonParser parser, String path) throws IOException {
        JsonToken token = parser.currentToken();
        if (type instanceof DecimalType && (token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT)) {
            DecimalType decimal = (DecimalType) type;
            return scaled(parser.getDecimalValue(), decimal.precision(), decimal.scale()) != null ? null : path;
        }
        if (type instanceof StructType && token == JsonToken.START_OBJECT) {
            StructType struct = (StructType) type;
            String found = null;
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                parser.nextToken();
                StructField field = found == null ? field(struct, name) : null;
                if (field != null) {
                    found = find(field.dataType(), parser, path.isEmpty() ? name : path + "." + name);
                } else {
                    parser.skipChildren();
                }
            }
            return found;
        }
        if (type instanceof ArrayType && token == JsonToken.START_ARRAY) {
            DataType element = ((ArrayType) type).elementType();
            String found = null;
            int i = 0;
            while (parser.nextToken() != JsonToken.END_ARRAY) {
                if (found == null) {
                    found = find(element, parser, path + "[" + i + "]");
                } else {
                    parser.skipChildren();
                }
                i++;
            }
            return found;
        }
        if (type instanceof MapType && token == JsonToken.START_OBJECT) {
            DataType value = ((MapType) type).valueType();
            String found = null;
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String key = parser.getCurrentName();
                parser.nextToken();
                if (found == null) {
                    found = find(value, parser, path + "[\"" + key + "\"]");
                } else {
                    parser.skipChildren();
                }
            }
            return found;
        }
        parser.skipChildren();  // another type or another token: not this function's to judge
        return null;
    }

    private static StructField field(StructType struct, String name) {
        for (StructField field : struct.fields()) {
            if (field.name().equals(name)) {
                return field;
            }
        }
        return null;
    }

    /** The value at the declared scale, or null when the declared precision and scale cannot hold it with no digit
     * lost: more fraction digits than the scale (the cast would round them away) or more integer digits than the type
     * holds. StrictJsonRecord answers a decimal only through this. */
    static BigDecimal scaled(BigDecimal value, int precision, int scale) {
        BigDecimal scaled;
        try {
            scaled = value.setScale(scale, RoundingMode.UNNECESSARY);
        } catch (ArithmeticException inexact) {
            return null;
        }
        return scaled.precision() <= precision ? scaled : null;
    }
}

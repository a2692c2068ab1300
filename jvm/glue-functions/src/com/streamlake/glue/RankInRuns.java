package com.streamlake.glue;

import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.LongAccumulator;

/**
 * The compaction's survivors without a window operator (compaction/transforms.py survivors_in_runs): over a frame whose
 * partitions hold all rows of a key and are sorted by the key, then survivor first (a hash repartition by the key, then
 * sortWithinPartitions), the rows of a key are one run, and its first row is the survivor. One pass keeps each run's
 * first row and drops the others, remembering only the previous key: Spark's window operator (row_number over the key)
 * buffers every key's rows first, which cost the compaction 0.3-0.75 s per million rows over the sort alone
 * (docs/performance.md). A row with a null key field is kept: nothing says two such rows are the same record (the
 * window path does the same).
 *
 * <p>The pass counts the rows it reads and the copies it drops into two accumulators the caller made, in the same pass:
 * an {@code Observation} of the same counts cost the compaction 0.45-0.7 s per million rows (docs/performance.md). The
 * caller reads them after the write. Spark's programming guide warns that updates made in a transformation may be
 * applied more than once when a task or stage runs again; this pass runs in the write's result tasks, and for a result
 * task the scheduler applies the updates of one successful attempt per partition (apache/spark DAGScheduler, "Only
 * update the accumulator once for each result task", pull request 19877). A count off for any other reason fails the
 * compaction's verification, which publishes nothing.
 *
 * <p>{@link #survivorsAccounted} also accounts for the rows it reads and the copies it drops, in the same pass
 * (compaction/verify.py): each top-level field's non-null values, the sum of the key hashes and the rows without a
 * key, and how many dropped copies differ from the copy kept in the content fields the caller names. Content compares by value at any depth: a map's entries in another order
 * are the same map, a double NaN equals NaN and -0.0 equals 0.0 (as the window path's content hash, Spark's xxhash64,
 * hashes them: {@code xxhash64(-0.0) = xxhash64(0.0)} run on Spark 3.5). The kept copy of each key is copied once to compare against.
 *
 * <p>A key whose run comes after a greater key's (the rows not sorted by the key, so two runs of one key could each
 * keep a copy) fails the pass: every key in a partition forms one run, so the survivors hold each key once.
 *
 * <p>Only key fields of types whose values compare by {@code equals} are accepted (strings, integers, booleans,
 * dates, timestamps, decimals); the caller keeps the window for any other key. Each key value is copied before the
 * next row is read: Spark reuses the row object of its iterator.
 *
 * <p>The frame is reached through the public Java RDD API; the two steps between a DataFrame and its rows are
 * Spark's own internals, looked up by name because Spark 4 moved them to the classic Dataset and SparkSession
 * (apache/spark sql/core Dataset.scala {@code queryExecution}, QueryExecution {@code toRdd}, SparkSession
 * {@code internalCreateDataFrame}, private[sql] in Scala and public in the bytecode). Checked on Spark 3.3, 3.5 and 4.1
 * (tests/spark/test_compaction_ranks.py); unverified on Glue's own Spark builds, where the caller falls back to the
 * window if this throws.
 */
public final class RankInRuns {
    private RankInRuns() {
    }

    /**
     * {@code frame} (an org.apache.spark.sql Dataset of rows, prepared as the class doc says) without the copies that do
     * not survive, same schema. {@code keyFields}: the key's field names; {@code rowsIn} counts every row read and
     * {@code duplicates} every row dropped, once the frame is computed.
     */
    @SuppressWarnings("unchecked")
    public static Object survivors(Object frame, List<String> keyFields, LongAccumulator rowsIn, LongAccumulator duplicates)
            throws Exception {
        return survivorsAccounted(frame, keyFields, null, null, rowsIn, duplicates, null, null, null);
    }

    /**
     * {@link #survivors}, and the rows read and the copies dropped accounted, each in a list of accumulators, one per
     * field of the frame's schema, in its order, counting that field's non-null values, then two summing the long field
     * {@code hashField} (the caller's hash of the key) over the rows with a key, as unsigned halves (the low 32 bits,
     * then the high 32), then one counting the rows without a key: {@code read} over every row, {@code dropped} over the
     * dropped copies. {@code differing} counts the dropped copies that differ from the copy kept in the fields
     * {@code contentFields} names.
     */
    public static Object survivorsAccounted(Object frame, List<String> keyFields, List<String> contentFields,
            String hashField, LongAccumulator rowsIn, LongAccumulator duplicates, List<LongAccumulator> read,
            List<LongAccumulator> dropped, LongAccumulator differing) throws Exception {
        StructType schema = (StructType) call(frame, "schema");
        int[] ordinals = new int[keyFields.size()];
        DataType[] types = new DataType[keyFields.size()];
        for (int i = 0; i < keyFields.size(); i++) {
            ordinals[i] = schema.fieldIndex(keyFields.get(i));
            types[i] = schema.fields()[ordinals[i]].dataType();
            if (!comparable(types[i])) {
                throw new IllegalArgumentException("key field " + keyFields.get(i) + " has type " + types[i].simpleString()
                        + ": ranking in runs takes strings, integers, booleans, dates, timestamps and decimals");
            }
        }
        Accounting accounting = null;
        if (contentFields != null) {
            int fields = schema.fields().length;
            if (read.size() != fields + 3 || dropped.size() != fields + 3) {
                throw new IllegalArgumentException(read.size() + " and " + dropped.size() + " accumulators for "
                        + fields + " fields: " + (fields + 3) + " each");
            }
            int[] content = new int[contentFields.size()];
            for (int i = 0; i < content.length; i++) {
                content[i] = schema.fieldIndex(contentFields.get(i));
            }
            DataType[] all = new DataType[fields];
            for (int i = 0; i < fields; i++) {
                all[i] = schema.fields()[i].dataType();
            }
            int hash = schema.fieldIndex(hashField);
            accounting = new Accounting(all, content, new Tally(read, hash), new Tally(dropped, hash), differing);
        }
        RDD<InternalRow> rows = (RDD<InternalRow>) call(call(frame, "queryExecution"), "toRdd");
        JavaRDD<InternalRow> kept = rows.toJavaRDD().mapPartitions(
                new FirstOfRuns(ordinals, types, rowsIn, duplicates, accounting));
        Object session = call(frame, "sparkSession");
        Method create = session.getClass().getMethod("internalCreateDataFrame", RDD.class, StructType.class, boolean.class);
        return create.invoke(session, kept.rdd(), schema, false);
    }

    static boolean comparable(DataType type) {
        return type.equals(DataTypes.StringType) || type.equals(DataTypes.LongType) || type.equals(DataTypes.IntegerType)
                || type.equals(DataTypes.ShortType) || type.equals(DataTypes.ByteType) || type.equals(DataTypes.BooleanType)
                || type.equals(DataTypes.DateType) || type.equals(DataTypes.TimestampType)
                || type.typeName().startsWith("decimal");
    }

    /** Two values of {@code type} are the same content (the class doc says how). */
    static boolean same(Object a, Object b, DataType type) {
        if (a == null || b == null) {
            return a == b;
        }
        if (type instanceof StructType) {
            StructField[] fields = ((StructType) type).fields();
            InternalRow x = (InternalRow) a;
            InternalRow y = (InternalRow) b;
            for (int i = 0; i < fields.length; i++) {
                DataType field = fields[i].dataType();
                if (!same(x.isNullAt(i) ? null : x.get(i, field), y.isNullAt(i) ? null : y.get(i, field), field)) {
                    return false;
                }
            }
            return true;
        }
        if (type instanceof ArrayType) {
            DataType element = ((ArrayType) type).elementType();
            ArrayData x = (ArrayData) a;
            ArrayData y = (ArrayData) b;
            if (x.numElements() != y.numElements()) {
                return false;
            }
            for (int i = 0; i < x.numElements(); i++) {
                if (!same(x.isNullAt(i) ? null : x.get(i, element), y.isNullAt(i) ? null : y.get(i, element), element)) {
                    return false;
                }
            }
            return true;
        }
        if (type instanceof MapType) {
            return sameMap((MapData) a, (MapData) b, (MapType) type);
        }
        if (a instanceof byte[]) {
            return Arrays.equals((byte[]) a, (byte[]) b);
        }
        if (a instanceof Double) {
            double x = (Double) a;
            double y = (Double) b;
            return x == y || (Double.isNaN(x) && Double.isNaN(y));
        }
        if (a instanceof Float) {
            float x = (Float) a;
            float y = (Float) b;
            return x == y || (Float.isNaN(x) && Float.isNaN(y));
        }
        return a.equals(b);
    }

    private static boolean sameMap(MapData x, MapData y, MapType type) {
        int size = x.numElements();
        if (size != y.numElements()) {
            return false;
        }
        DataType key = type.keyType();
        DataType value = type.valueType();
        Map<Object, Object> entries = new HashMap<>();
        for (int i = 0; i < size; i++) {
            Object entry = x.valueArray().isNullAt(i) ? null : x.valueArray().get(i, value);
            entries.put(x.keyArray().get(i, key), entry);
        }
        for (int i = 0; i < size; i++) {
            Object found = y.keyArray().get(i, key);
            if (!entries.containsKey(found)) {
                return false;
            }
            Object entry = y.valueArray().isNullAt(i) ? null : y.valueArray().get(i, value);
            if (!same(entries.get(found), entry, value)) {
                return false;
            }
        }
        return true;
    }

    private static Object call(Object target, String method) throws Exception {
        return target.getClass().getMethod(method).invoke(target);
    }

    /** An account of rows in accumulators (survivorsAccounted says which). */
    private static final class Tally implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private final LongAccumulator[] nonNull;
        private final LongAccumulator hashLow;
        private final LongAccumulator hashHigh;
        private final LongAccumulator keyless;
        private final int hash;

        Tally(List<LongAccumulator> accumulators, int hash) {
            int fields = accumulators.size() - 3;
            this.nonNull = accumulators.subList(0, fields).toArray(new LongAccumulator[0]);
            this.hashLow = accumulators.get(fields);
            this.hashHigh = accumulators.get(fields + 1);
            this.keyless = accumulators.get(fields + 2);
            this.hash = hash;
        }

        void add(InternalRow row, boolean keyed) {
            for (int i = 0; i < nonNull.length; i++) {
                if (!row.isNullAt(i)) {
                    nonNull[i].add(1L);
                }
            }
            if (keyed) {
                long value = row.getLong(hash);
                hashLow.add(value & 0xFFFFFFFFL);
                hashHigh.add(value >>> 32);
            } else {
                keyless.add(1L);
            }
        }
    }

    /** The account of the rows read and the copies dropped, and of the copies that differ from the one kept. */
    private static final class Accounting implements java.io.Serializable {
        private static final long serialVersionUID = 2L;
        private final DataType[] types;  // every field's
        private final int[] content;
        private final Tally read;
        private final Tally dropped;
        private final LongAccumulator differing;

        Accounting(DataType[] types, int[] content, Tally read, Tally dropped, LongAccumulator differing) {
            this.types = types;
            this.content = content;
            this.read = read;
            this.dropped = dropped;
            this.differing = differing;
        }

        void read(InternalRow row, boolean keyed) {
            read.add(row, keyed);
        }

        void dropped(InternalRow row, InternalRow kept) {
            dropped.add(row, true);  // a dropped copy has a key: a row without one is always kept
            for (int i : content) {
                Object a = kept.isNullAt(i) ? null : kept.get(i, types[i]);
                Object b = row.isNullAt(i) ? null : row.get(i, types[i]);
                if (!same(a, b, types[i])) {
                    differing.add(1L);
                    return;
                }
            }
        }
    }

    private static final class FirstOfRuns implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
        private static final long serialVersionUID = 3L;
        private final int[] ordinals;
        private final DataType[] types;
        private final LongAccumulator rowsIn;
        private final LongAccumulator duplicates;
        private final Accounting accounting;  // null: the dropped copies are only counted

        FirstOfRuns(int[] ordinals, DataType[] types, LongAccumulator rowsIn, LongAccumulator duplicates,
                Accounting accounting) {
            this.ordinals = ordinals;
            this.types = types;
            this.rowsIn = rowsIn;
            this.duplicates = duplicates;
            this.accounting = accounting;
        }

        @Override
        public Iterator<InternalRow> call(final Iterator<InternalRow> rows) {
            final Object[] previous = new Object[ordinals.length];
            return new Iterator<InternalRow>() {
                private boolean started;
                private InternalRow kept;  // a copy of the current run's survivor, when accounting
                private InternalRow next;  // the next survivor, read ahead by hasNext

                @Override
                public boolean hasNext() {
                    while (next == null && rows.hasNext()) {
                        InternalRow row = rows.next();
                        rowsIn.add(1L);
                        if (accounting != null) {
                            accounting.read(row, keyed(row));
                        }
                        if (survives(row)) {
                            next = row;
                        } else {
                            duplicates.add(1L);
                            if (accounting != null) {
                                accounting.dropped(row, kept);
                            }
                        }
                    }
                    return next != null;
                }

                @Override
                public InternalRow next() {
                    if (!hasNext()) {
                        throw new NoSuchElementException();
                    }
                    InternalRow row = next;
                    next = null;
                    return row;
                }

                /** How this row's key compares with the previous run's, in Spark's ascending order of the key fields. */
                @SuppressWarnings({"unchecked", "rawtypes"})
                private int after(InternalRow row) {
                    for (int i = 0; i < ordinals.length; i++) {
                        int order = ((Comparable) row.get(ordinals[i], types[i])).compareTo(previous[i]);
                        if (order != 0) {
                            return order;
                        }
                    }
                    return 0;
                }

                private String key(InternalRow row) {
                    Object[] values = new Object[ordinals.length];
                    for (int i = 0; i < ordinals.length; i++) {
                        values[i] = row.get(ordinals[i], types[i]);
                    }
                    return Arrays.toString(values);
                }

                private boolean keyed(InternalRow row) {
                    for (int ordinal : ordinals) {
                        if (row.isNullAt(ordinal)) {
                            return false;
                        }
                    }
                    return true;
                }

                private boolean survives(InternalRow row) {
                    boolean repeated = started;
                    for (int i = 0; i < ordinals.length; i++) {
                        if (row.isNullAt(ordinals[i])) {
                            return true;  // a null key field: kept, and no run is started
                        }
                        Object value = row.get(ordinals[i], types[i]);
                        repeated = repeated && value.equals(previous[i]);
                    }
                    if (!repeated) {
                        if (started && after(row) <= 0) {
                            throw new IllegalStateException("the rows are not sorted by the key: a run of key "
                                    + key(row) + " after one of " + Arrays.toString(previous)
                                    + "; ranking in runs would keep two copies of a key");
                        }
                        for (int i = 0; i < ordinals.length; i++) {
                            Object value = row.get(ordinals[i], types[i]);
                            previous[i] = value instanceof UTF8String ? ((UTF8String) value).clone() : value;
                        }
                        started = true;
                        if (accounting != null) {
                            kept = row.copy();
                        }
                    }
                    return !repeated;
                }
            };
        }
    }
}

package com.streamlake.glue;

import java.lang.reflect.Method;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
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
        RDD<InternalRow> rows = (RDD<InternalRow>) call(call(frame, "queryExecution"), "toRdd");
        JavaRDD<InternalRow> kept = rows.toJavaRDD().mapPartitions(new FirstOfRuns(ordinals, types, rowsIn, duplicates));
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

    private static Object call(Object target, String method) throws Exception {
        return target.getClass().getMethod(method).invoke(target);
    }

    private static final class FirstOfRuns implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
        private static final long serialVersionUID = 2L;
        private final int[] ordinals;
        private final DataType[] types;
        private final LongAccumulator rowsIn;
        private final LongAccumulator duplicates;

        FirstOfRuns(int[] ordinals, DataType[] types, LongAccumulator rowsIn, LongAccumulator duplicates) {
            this.ordinals = ordinals;
            this.types = types;
            this.rowsIn = rowsIn;
            this.duplicates = duplicates;
        }

        @Override
        public Iterator<InternalRow> call(final Iterator<InternalRow> rows) {
            final Object[] previous = new Object[ordinals.length];
            return new Iterator<InternalRow>() {
                private boolean started;
                private InternalRow next;  // the next survivor, read ahead by hasNext

                @Override
                public boolean hasNext() {
                    while (next == null && rows.hasNext()) {
                        InternalRow row = rows.next();
                        rowsIn.add(1L);
                        if (survives(row)) {
                            next = row;
                        } else {
                            duplicates.add(1L);
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
                        for (int i = 0; i < ordinals.length; i++) {
                            Object value = row.get(ordinals[i], types[i]);
                            previous[i] = value instanceof UTF8String ? ((UTF8String) value).clone() : value;
                        }
                        started = true;
                    }
                    return !repeated;
                }
            };
        }
    }
}

package com.streamlake.glue;

import java.lang.reflect.Method;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The compaction's duplicate rank without a window operator (compaction/transforms.py rank_duplicates_in_runs): over
 * a frame whose partitions hold all rows of a key and are sorted by the key, then survivor first (a hash repartition
 * by the key, then sortWithinPartitions), the rows of a key are one run, and its first row is the survivor. Each row
 * gets its rank, 1 for the first row of its run and 2 for the others, in one pass that keeps only the previous key:
 * Spark's window operator (row_number over the key) buffers every key's rows first, which cost the compaction
 * 0.3-0.75 s per million rows over the sort alone (docs/performance.md). A row with a null key field gets 1: nothing
 * says two such rows are the same record (the window path does the same).
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
     * {@code frame} (an org.apache.spark.sql Dataset of rows, prepared as the class doc says) with an int column
     * {@code rankName} appended: the row's rank in its key's run. {@code keyFields}: the key's field names.
     */
    @SuppressWarnings("unchecked")
    public static Object rank(Object frame, List<String> keyFields, String rankName) throws Exception {
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
        JavaRDD<InternalRow> ranked = rows.toJavaRDD().mapPartitions(new Ranker(ordinals, types));
        Object session = call(frame, "sparkSession");
        Method create = session.getClass().getMethod("internalCreateDataFrame", RDD.class, StructType.class, boolean.class);
        return create.invoke(session, ranked.rdd(), schema.add(rankName, DataTypes.IntegerType, false), false);
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

    private static final class Ranker implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
        private static final long serialVersionUID = 1L;
        private final int[] ordinals;
        private final DataType[] types;

        Ranker(int[] ordinals, DataType[] types) {
            this.ordinals = ordinals;
            this.types = types;
        }

        @Override
        public Iterator<InternalRow> call(final Iterator<InternalRow> rows) {
            final GenericInternalRow first = new GenericInternalRow(new Object[] {1});
            final GenericInternalRow other = new GenericInternalRow(new Object[] {2});
            final JoinedRow joined = new JoinedRow();
            final Object[] previous = new Object[ordinals.length];
            return new Iterator<InternalRow>() {
                private boolean started;

                @Override
                public boolean hasNext() {
                    return rows.hasNext();
                }

                @Override
                public InternalRow next() {
                    if (!rows.hasNext()) {
                        throw new NoSuchElementException();
                    }
                    InternalRow row = rows.next();
                    boolean repeated = started;
                    for (int i = 0; i < ordinals.length; i++) {
                        if (row.isNullAt(ordinals[i])) {
                            return joined.apply(row, first);  // a null key field: kept, and no run is started
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
                    return joined.apply(row, repeated ? other : first);
                }
            };
        }
    }
}

package com.streamlake.glue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The thread pool of the bulk file operations ({@link BulkDelete}, {@link BulkRename}): items 0 .. count-1, a few at a
 * time on daemon threads, each item's task catching what it can itself, the call returning once every item is done.
 */
final class BulkThreads {
    interface Task {
        void run(int index);
    }

    private BulkThreads() {
    }

    /** Run {@code task} for each index below {@code count}, {@code threads} at a time (inline for one thread). */
    static void run(int count, int threads, String name, final Task task) throws InterruptedException {
        int poolSize = Math.max(1, Math.min(threads, count));
        if (poolSize == 1) {
            for (int i = 0; i < count; i++) {
                task.run(i);
            }
            return;
        }
        ExecutorService pool = Executors.newFixedThreadPool(poolSize, daemonThreads(name));
        try {
            List<Future<?>> futures = new ArrayList<Future<?>>(count);
            for (int i = 0; i < count; i++) {
                final int index = i;
                futures.add(pool.submit(new Runnable() {
                    @Override
                    public void run() {
                        task.run(index);
                    }
                }));
            }
            for (Future<?> future : futures) {
                try {
                    future.get();
                } catch (ExecutionException unexpected) {  // each task catches everything it can
                    throw new IllegalStateException(unexpected.getCause());
                }
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /** "&lt;class&gt;: &lt;message&gt;" of a failure, on one line and without tabs (the answers are lines of fields). */
    static String describe(Throwable failure) {
        return (failure.getClass().getName() + ": " + failure.getMessage()).replace('\n', ' ').replace('\t', ' ');
    }

    private static ThreadFactory daemonThreads(final String name) {
        final AtomicInteger count = new AtomicInteger();
        return new ThreadFactory() {
            @Override
            public Thread newThread(Runnable task) {
                Thread thread = new Thread(task, name + "-" + count.incrementAndGet());
                thread.setDaemon(true);
                return thread;
            }
        };
    }
}

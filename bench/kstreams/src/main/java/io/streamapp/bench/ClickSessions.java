package io.streamapp.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.TimestampExtractor;

/**
 * Click sessions in Kafka Streams: clicks and page views per session in 1-minute tumbling windows on
 * the event's own time (field "ts"), 30 s grace. The input is keyed by session id already, so the
 * aggregation groups by key without a repartition topic. "final" suppresses until the window closes
 * (one row per window); "updates" emits on each commit / cache flush.
 *
 * Arguments: bootstrap input output applicationId stateDir threads commitMs final|updates
 */
public final class ClickSessions {
    static final ObjectMapper JSON = new ObjectMapper();

    /** The event time: the "ts" field, read without parsing the whole document. */
    public static final class EventTime implements TimestampExtractor {
        @Override
        public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
            Object value = record.value();
            if (value instanceof String s) {
                int at = s.indexOf("\"ts\"");
                if (at >= 0) {
                    int open = s.indexOf('"', s.indexOf(':', at) + 1);
                    int close = s.indexOf('"', open + 1);
                    try {
                        return Instant.parse(s.substring(open + 1, close)).toEpochMilli();
                    } catch (RuntimeException ignored) {
                        // fall through: unreadable time
                    }
                }
            }
            return partitionTime;
        }
    }

    /** A click or page view with what the aggregate needs. */
    record Click(String uuid, String event, long timeSpent) {
        static Click parse(String json) {
            try {
                JsonNode n = JSON.readTree(json);
                return new Click(n.path("uuid").asText(), n.path("event").asText(), n.path("time_spent").asLong());
            } catch (Exception e) {
                return null;
            }
        }

        boolean counted() {
            return "click".equals(event) || "page_view".equals(event);
        }
    }

    /** The running totals of one session window. */
    static final class Totals {
        String uuid = "";
        long clicks;
        long pageViews;
        long timeSpent;

        Totals add(Click c) {
            uuid = c.uuid();
            if ("click".equals(c.event())) {
                clicks++;
            } else {
                pageViews++;
            }
            timeSpent += c.timeSpent();
            return this;
        }

        String toJson(Windowed<String> w) {
            return "{\"window_start\":\"" + Instant.ofEpochMilli(w.window().start()) + "\",\"window_end\":\""
                    + Instant.ofEpochMilli(w.window().end()) + "\",\"session_id\":" + quote(w.key()) + ",\"uuid\":"
                    + quote(uuid) + ",\"clicks\":" + clicks + ",\"page_views\":" + pageViews + ",\"time_spent\":"
                    + timeSpent + "}";
        }

        static String quote(String s) {
            try {
                return JSON.writeValueAsString(s);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    static <T> Serde<T> serde(Serializer<T> ser, Deserializer<T> de) {
        return Serdes.serdeFrom(ser, de);
    }

    static final Serde<Click> CLICKS = serde((topic, c) -> {
        byte[] u = c.uuid().getBytes(StandardCharsets.UTF_8);
        byte[] e = c.event().getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(16 + u.length + e.length).putInt(u.length).put(u).putInt(e.length).put(e)
                .putLong(c.timeSpent()).array();
    }, (topic, bytes) -> {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        byte[] u = new byte[b.getInt()];
        b.get(u);
        byte[] e = new byte[b.getInt()];
        b.get(e);
        return new Click(new String(u, StandardCharsets.UTF_8), new String(e, StandardCharsets.UTF_8), b.getLong());
    });

    static final Serde<Totals> TOTALS = serde((topic, t) -> {
        byte[] u = t.uuid.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(28 + u.length).putInt(u.length).put(u).putLong(t.clicks).putLong(t.pageViews)
                .putLong(t.timeSpent).array();
    }, (topic, bytes) -> {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        byte[] u = new byte[b.getInt()];
        b.get(u);
        Totals t = new Totals();
        t.uuid = new String(u, StandardCharsets.UTF_8);
        t.clicks = b.getLong();
        t.pageViews = b.getLong();
        t.timeSpent = b.getLong();
        return t;
    });

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 8) {
            System.err.println("usage: bootstrap input output applicationId stateDir threads commitMs final|updates");
            System.exit(2);
        }
        StreamsBuilder builder = new StreamsBuilder();
        KTable<Windowed<String>, Totals> windows = builder
                .stream(args[1], Consumed.with(Serdes.String(), Serdes.String()).withTimestampExtractor(new EventTime()))
                .mapValues(Click::parse)
                .filter((key, click) -> click != null && click.counted())
                .groupByKey(Grouped.with(Serdes.String(), CLICKS))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
                .aggregate(Totals::new, (key, click, totals) -> totals.add(click), Materialized.with(Serdes.String(), TOTALS));
        if ("final".equals(args[7])) {
            windows = windows.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        windows.toStream()
                .map((w, totals) -> KeyValue.pair(w.key(), totals.toJson(w)))
                .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[5]));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[6]));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        System.out.println("started " + args[3]);
        done.await();
    }
}

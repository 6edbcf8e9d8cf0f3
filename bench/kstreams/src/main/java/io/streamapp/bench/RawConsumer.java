package io.streamapp.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The ceiling: read every record of a topic from the beginning and do nothing with it but count its
 * bytes. Prints "progress EPOCH_MS RECORDS" lines as it goes and exits after EXPECTED records; when
 * EXPECTED is more than the topic holds it reads the topic again from the beginning (several passes).
 *
 * Arguments: bootstrap topic expected
 */
public final class RawConsumer {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long expected = Long.parseLong(args[2]);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(args[1])) {
                parts.add(new TopicPartition(p.topic(), p.partition()));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> ends = consumer.endOffsets(parts);
            long size = 0;
            for (TopicPartition p : parts) {
                size += ends.get(p) - consumer.beginningOffsets(List.of(p)).get(p);
            }
            long pass = 0;
            long count = 0;
            long bytes = 0;
            long lastReport = 0;
            while (count < expected) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    bytes += r.value() == null ? 0 : r.value().length;
                }
                count += batch.count();
                pass += batch.count();
                if (pass >= size && count < expected) {
                    consumer.seekToBeginning(parts);
                    pass = 0;
                }
                long now = System.currentTimeMillis();
                if (now - lastReport >= 50 || count >= expected) {
                    System.out.println("progress " + now + " " + count);
                    lastReport = now;
                }
            }
            System.out.println("done " + count + " records " + bytes + " bytes");
        }
    }
}

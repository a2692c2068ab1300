import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;

import com.amazonaws.services.schemaregistry.serializers.GlueSchemaRegistryKafkaSerializer;
import com.amazonaws.services.schemaregistry.utils.AWSSchemaRegistryConstants;

/**
 * Test helper: frames made by AWS's own Schema Registry serializer (software.amazon.glue:schema-registry-serde).
 *
 * <p>args: endpoint region registry schemaName schemaFile compression(NONE|ZLIB). stdin: one base64 Avro binary body
 * per line (written by fastavro with the same schema); each is read into a GenericRecord and serialized by
 * GlueSchemaRegistryKafkaSerializer, which looks the schema version up in the registry (auto-registration off).
 * stdout: one base64 frame per line; first line: the schema text the serializer sends (Avro's Schema.toString()).
 */
public final class AwsSerdeFrames {
    public static void main(String[] args) throws Exception {
        Schema schema = new Schema.Parser().parse(new File(args[4]));
        Map<String, Object> configs = new HashMap<>();
        configs.put(AWSSchemaRegistryConstants.AWS_ENDPOINT, args[0]);
        configs.put(AWSSchemaRegistryConstants.AWS_REGION, args[1]);
        configs.put(AWSSchemaRegistryConstants.REGISTRY_NAME, args[2]);
        configs.put(AWSSchemaRegistryConstants.SCHEMA_NAME, args[3]);
        configs.put(AWSSchemaRegistryConstants.DATA_FORMAT, "AVRO");
        configs.put(AWSSchemaRegistryConstants.SCHEMA_AUTO_REGISTRATION_SETTING, false);
        configs.put(AWSSchemaRegistryConstants.COMPRESSION_TYPE, args[5]);
        GlueSchemaRegistryKafkaSerializer serializer = new GlueSchemaRegistryKafkaSerializer(configs, null);
        GenericDatumReader<GenericRecord> reader = new GenericDatumReader<>(schema);
        System.out.println(schema.toString());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            byte[] body = Base64.getDecoder().decode(line.trim());
            GenericRecord record = reader.read(null, DecoderFactory.get().binaryDecoder(body, null));
            System.out.println(Base64.getEncoder().encodeToString(serializer.serialize("orders-events", record)));
        }
        System.out.flush();
    }
}

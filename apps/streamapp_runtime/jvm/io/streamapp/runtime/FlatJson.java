package io.streamapp.runtime;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashMap;

/**
 * A Kafka value's JSON object read straight from its bytes, for flat schemas: the fast path in front
 * of Spark's from_json, which decodes every record through a new InputStreamReader
 * (CreateJacksonParser.utf8String) and ran at less than half this speed on the benchmark's clicks.
 *
 * It answers only when the answer is certain to be from_json's; for anything else it returns null
 * and the runtime asks from_json (coalesce), so malformed records, wrong types and Spark's lenient
 * forms (single quotes, numbers as text, other timestamp forms) keep exactly Spark's reading.
 * Null means: not one strict JSON object, invalid UTF-8 or a byte-order mark, a repeated field, a value of another token
 * type than the field's, a number out of range, a timestamp not in yyyy-MM-ddTHH:mm:ss[.SSS]Z, or
 * anything after the object.
 * (A timestamp is also left to from_json before the year 1900.)
 *
 * The second argument is the layout, "name:kind,..." with kinds s string, l long, i int, d double,
 * b boolean, t timestamp (streamapp_runtime.compile.sources.flat_json_layout). The row has one more field, the
 * corrupt-record column, always null here.
 */
public final class FlatJson implements UDF2<byte[], String, Row> {
  private static final JsonFactory FACTORY = new JsonFactory();

  /** The layout read once (immutable, so an instance shared by threads sees a whole one). */
  private static final class Layout {
    final String text;
    final HashMap<String, Integer> fieldIndex = new HashMap<>();
    final char[] kinds;

    Layout(String text) {
      String[] parts = text.split(",");
      kinds = new char[parts.length];
      for (int i = 0; i < parts.length; i++) {
        int colon = parts[i].lastIndexOf(':');
        fieldIndex.put(parts[i].substring(0, colon), i);
        kinds[i] = parts[i].charAt(colon + 1);
      }
      this.text = text;
    }
  }

  private transient volatile Layout layout;

  @Override
  public Row call(byte[] value, String layoutText) {
    if (value == null || layoutText == null || !plainUtf8Start(value)) return null;
    Layout read = layout;
    if (read == null || !read.text.equals(layoutText)) layout = read = new Layout(layoutText);
    HashMap<String, Integer> fieldIndex = read.fieldIndex;
    char[] kinds = read.kinds;
    Object[] fields = new Object[kinds.length + 1];
    boolean[] seen = new boolean[kinds.length];
    try (JsonParser parser = FACTORY.createParser(value, 0, value.length)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) return null;
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        Integer at = fieldIndex.get(parser.currentName());
        JsonToken valueToken = parser.nextToken();
        if (at == null) {  // not in the schema: from_json skips it too
          parser.skipChildren();
          continue;
        }
        if (seen[at]) return null;
        seen[at] = true;
        if (valueToken == JsonToken.VALUE_NULL) continue;
        Object field = read(parser, valueToken, kinds[at]);
        if (field == null) return null;
        fields[at] = field;
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) return null;
    } catch (Exception notStrictJson) {
      return null;
    }
    return RowFactory.create(fields);
  }

  /**
   * Jackson guesses a byte source's encoding from its first four bytes (a byte-order mark, or zero
   * bytes as in UTF-16 and UTF-32) where Spark always decodes UTF-8: a value that opens with
   * anything but ASCII whitespace or '{', or has a zero byte among its first four, is left to from_json.
   */
  private static boolean plainUtf8Start(byte[] value) {
    if (value.length == 0) return false;
    byte first = value[0];
    if (first != '{' && first != ' ' && first != '\t' && first != '\n' && first != '\r') return false;
    for (int i = 1; i < Math.min(4, value.length); i++) {
      if (value[i] == 0) return false;
    }
    return true;
  }

  private static Object read(JsonParser parser, JsonToken token, char kind) throws java.io.IOException {
    switch (kind) {
      case 's':
        return token == JsonToken.VALUE_STRING ? parser.getText() : null;
      case 'l':
        return token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() != JsonParser.NumberType.BIG_INTEGER
            ? (Object) parser.getLongValue() : null;
      case 'i':
        return token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() == JsonParser.NumberType.INT
            ? (Object) parser.getIntValue() : null;
      case 'd':
        return token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT
            ? (Object) parser.getDoubleValue() : null;
      case 'b':
        return token == JsonToken.VALUE_TRUE ? Boolean.TRUE : token == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
      case 't':
        return token == JsonToken.VALUE_STRING ? utcInstant(parser.getText()) : null;
      default:
        return null;
    }
  }

  /** yyyy-MM-ddTHH:mm:ssZ or yyyy-MM-ddTHH:mm:ss.SSSZ as an instant; null for any other text. */
  static Instant utcInstant(String text) {
    int n = text.length();
    if ((n != 20 && n != 24) || text.charAt(n - 1) != 'Z' || text.charAt(4) != '-' || text.charAt(7) != '-'
        || text.charAt(10) != 'T' || text.charAt(13) != ':' || text.charAt(16) != ':'
        || (n == 24 && text.charAt(19) != '.')) {
      return null;
    }
    int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
    int hour = digits(text, 11, 2), minute = digits(text, 14, 2), second = digits(text, 17, 2);
    int milli = n == 24 ? digits(text, 20, 3) : 0;
    // Before 1900 the calendars of Spark's parser and its fallback may differ: left to from_json.
    if ((year | month | day | hour | minute | second | milli) < 0 || year < 1900) return null;
    try {
      return LocalDateTime.of(year, month, day, hour, minute, second, milli * 1_000_000).toInstant(ZoneOffset.UTC);
    } catch (DateTimeException invalidDate) {  // 2026-02-30, 24:00: left to from_json
      return null;
    }
  }

  private static int digits(String text, int from, int count) {
    int value = 0;
    for (int i = from; i < from + count; i++) {
      char c = text.charAt(i);
      if (c < '0' || c > '9') return -1;
      value = value * 10 + (c - '0');
    }
    return value;
  }
}

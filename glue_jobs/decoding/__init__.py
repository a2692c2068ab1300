"""Decoding: a source's bytes read as records, before any contract: the JSON tokenizer and the typed parse of JSON
text, and the Schema Registry frames of a Kafka topic. Imports nothing of the later stages (contract, lake, commit)."""

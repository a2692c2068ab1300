"""Every alarm: namespace, metric, every dimension, statistic, period, threshold, comparison, actions."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from infra.config import load_config
from infra.monitoring import Monitoring, MskSignals, StreamingJobSignals


@pytest.fixture(scope="module")
def template() -> assertions.Template:
    prod = load_config().get("prod")
    stack = cdk.Stack(cdk.App(), "Mon")
    Monitoring(
        stack,
        "Monitoring",
        environment="prod",
        alarms=prod.alarms,
        window_size_seconds=60,
        notification_emails=("oncall@example.com",),
        stream_names={"clickstream": "clickstream-stream"},
        streaming_jobs=[
            StreamingJobSignals("clickstream", "clickstream-job", "kinesis", "clickstream-stream"),
            StreamingJobSignals("orders", "orders-job", "kafka", None, retention_ms=168 * 3_600_000),
        ],
        datasets={"clickstream": ("clickstream",), "orders": ("orders",)},
        compaction_job_name="compaction-job",
        msk=MskSignals("lake-msk", 3),
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    return assertions.Template.from_stack(stack)


def _alarms(template) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template.find_resources("AWS::CloudWatch::Alarm").items()}


def _by_prefix(template, prefix: str) -> dict:
    found = [p for k, p in _alarms(template).items() if k.startswith(f"Monitoring{prefix}")]
    assert len(found) == 1, f"{prefix}: {len(found)} alarms"
    return found[0]


def _actions_ok(props: dict) -> None:
    topic = {"Ref": assertions.Match.string_like_regexp("MonitoringAlarmTopic")}
    assert len(props["AlarmActions"]) == 1 and len(props["OKActions"]) == 1
    assert props["AlarmActions"] == props["OKActions"] and "Ref" in props["AlarmActions"][0], topic


SINGLE_METRIC = [
    # (alarm id prefix, namespace, metric, dimensions, statistic, period, threshold, periods, comparison)
    ("IteratorAgeClickstream", "AWS/Kinesis", "GetRecords.IteratorAgeMilliseconds",
     {"StreamName": "clickstream-stream"}, "Maximum", 60, 120000, 3, "GreaterThanThreshold"),
    ("ReadThrottledClickstream", "AWS/Kinesis", "ReadProvisionedThroughputExceeded",
     {"StreamName": "clickstream-stream"}, "Sum", 60, 0, 5, "GreaterThanThreshold"),
    ("WriteThrottledClickstream", "AWS/Kinesis", "WriteProvisionedThroughputExceeded",
     {"StreamName": "clickstream-stream"}, "Sum", 60, 0, 5, "GreaterThanThreshold"),
    ("ConsumerLagClickstream", "Glue", "glue.driver.streaming.maxConsumerLagInMs",
     {"JobName": "clickstream-job", "JobRunId": "ALL", "Type": "gauge"}, "Maximum", 60, 300000, 3, "GreaterThanThreshold"),
    # Kafka: the job's own lag (Glue's metric belongs to its Kafka reader, which the job no longer uses).
    ("ConsumerLagOrders", "StreamLake", "ArrivalLagMs",
     {"Environment": "prod", "Source": "orders"}, "Maximum", 60, 300000, 3, "GreaterThanThreshold"),
    # Kafka: lag past half the topic's retention (prod: 168 h), before the retention deletes what the job has not read.
    ("LagPastHalfRetentionOrders", "StreamLake", "ArrivalLagMs",
     {"Environment": "prod", "Source": "orders"}, "Maximum", 60, 302_400_000, 1, "GreaterThanThreshold"),
    ("BatchOverrunClickstream", "StreamLake", "BatchDurationMs",
     {"Environment": "prod", "Source": "clickstream"}, "Maximum", 60, 60000, 3, "GreaterThanThreshold"),
    ("MskDiskUsedBroker3", "AWS/Kafka", "KafkaDataLogsDiskUsed",
     {"Cluster Name": "lake-msk", "Broker ID": "3"}, "Maximum", 300, 80, 3, "GreaterThanThreshold"),
    ("CompactionNotSucceeding", "StreamLake", "CompactionSucceeded",
     {"Environment": "prod"}, "Sum", 3600, 1, 3, "LessThanThreshold"),
    ("FreshnessOrders", "StreamLake", "NewestEventAgeSeconds",
     {"Dataset": "orders", "Environment": "prod"}, "Minimum", 300, 1800, 2, "GreaterThanThreshold"),
]


@pytest.mark.parametrize("prefix,ns,metric,dims,stat,period,threshold,periods,comparison", SINGLE_METRIC,
                         ids=[row[0] for row in SINGLE_METRIC])
def test_single_metric_alarm(template, prefix, ns, metric, dims, stat, period, threshold, periods, comparison):
    props = _by_prefix(template, prefix)
    assert (props["Namespace"], props["MetricName"]) == (ns, metric)
    assert {d["Name"]: d["Value"] for d in props["Dimensions"]} == dims
    assert (props["Statistic"], props["Period"], props["Threshold"]) == (stat, period, threshold)
    assert (props["EvaluationPeriods"], props["ComparisonOperator"]) == (periods, comparison)
    _actions_ok(props)


def test_compaction_alarm_treats_missing_data_as_breaching(template):
    assert _by_prefix(template, "CompactionNotSucceeding")["TreatMissingData"] == "breaching"


def _math(props: dict) -> tuple[str, dict[str, dict]]:
    queries = {q["Id"]: q for q in props["Metrics"]}
    expression = next(q["Expression"] for q in props["Metrics"] if "Expression" in q)
    stats = {qid: q["MetricStat"] for qid, q in queries.items() if "MetricStat" in q}
    return expression, stats


def _stat(stat: dict) -> tuple:
    m = stat["Metric"]
    return (m["Namespace"], m["MetricName"], {d["Name"]: d["Value"] for d in m["Dimensions"]}, stat["Stat"], stat["Period"])


def test_no_records_alarm_kinesis_compares_incoming_with_processed(template):
    props = _by_prefix(template, "NoRecordsProcessedClickstream")
    expression, stats = _math(props)
    assert expression == "IF(FILL(incoming, 0) > 0 AND FILL(processed, 0) == 0, 1, 0)"
    assert _stat(stats["incoming"]) == ("AWS/Kinesis", "IncomingRecords", {"StreamName": "clickstream-stream"}, "Sum", 600)
    assert _stat(stats["processed"]) == ("StreamLake", "RecordsIn", {"Environment": "prod", "Source": "clickstream"}, "Sum", 600)
    assert (props["Threshold"], props["ComparisonOperator"], props["EvaluationPeriods"]) == (1, "GreaterThanOrEqualToThreshold", 1)
    _actions_ok(props)


def test_no_records_alarm_kafka_uses_consumer_lag_as_incoming(template):
    _, stats = _math(_by_prefix(template, "NoRecordsProcessedOrders"))
    assert _stat(stats["incoming"]) == ("StreamLake", "ArrivalLagMs", {"Environment": "prod", "Source": "orders"}, "Maximum", 600)


def test_dead_letter_rate_alarm(template):
    props = _by_prefix(template, "DeadLetterRateOrders")
    expression, stats = _math(props)
    assert expression == "IF(FILL(records, 0) > 0, 100 * FILL(dead, 0) / records, 0)"
    assert _stat(stats["records"]) == ("StreamLake", "RecordsIn", {"Environment": "prod", "Source": "orders"}, "Sum", 300)
    assert _stat(stats["dead"]) == ("StreamLake", "DeadLetters", {"Environment": "prod", "Source": "orders"}, "Sum", 300)
    assert (props["Threshold"], props["EvaluationPeriods"], props["ComparisonOperator"]) == (5, 2, "GreaterThanThreshold")
    _actions_ok(props)


def test_alarm_inventory(template):
    # 3 per stream, (3 + the keeper's not-running and restarts-capped) per job x 2 + the Kafka job's half-retention
    # lag, 3 MSK brokers, 1 compaction, freshness + dead-letter share + no data per dataset x 2
    assert len(_alarms(template)) == 3 + 5 * 2 + 1 + 3 + 1 + 3 * 2


def _two_sources(no_data_minutes: int | None) -> dict[str, dict]:
    """A dataset fed by a Kinesis and a Kafka source: its alarms sum over both."""
    import dataclasses

    prod = load_config().get("prod")
    stack = cdk.Stack(cdk.App(), "Mon2")
    Monitoring(
        stack, "Monitoring", environment="prod", alarms=dataclasses.replace(prod.alarms, no_data_minutes=no_data_minutes),
        window_size_seconds=60, notification_emails=(), stream_names={"web": "web-stream"},
        streaming_jobs=[StreamingJobSignals("web", "web-job", "kinesis", "web-stream"),
                        StreamingJobSignals("app", "app-job", "kafka", None)],
        datasets={"clicks": ("web", "app")}, compaction_job_name="compaction-job", msk=None,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    return _alarms(assertions.Template.from_stack(stack))


def test_a_dataset_fed_by_two_sources_has_one_dead_letter_share_over_both():
    alarms = _two_sources(60)
    props = next(v for k, v in alarms.items() if k.startswith("MonitoringDeadLetterRateClicks"))
    expression, stats = _math(props)
    assert expression == ("IF((FILL(records0, 0) + FILL(records1, 0)) > 0, 100 * (FILL(dead0, 0) + FILL(dead1, 0)) / "
                          "(FILL(records0, 0) + FILL(records1, 0)), 0)")
    assert {_stat(stats[k])[2]["Source"] for k in ("records0", "records1", "dead0", "dead1")} == {"web", "app"}
    assert [_stat(stats[k])[1] for k in ("records0", "dead0")] == ["RecordsIn", "DeadLetters"]
    assert not any(k.startswith(("MonitoringDeadLetterRateWeb", "MonitoringDeadLetterRateApp")) for k in alarms)


def test_no_data_alarm_sums_the_sources_and_breaches_on_missing_data():
    props = next(v for k, v in _two_sources(45).items() if k.startswith("MonitoringNoDataClicks"))
    expression, stats = _math(props)
    assert expression == "(FILL(records0, 0) + FILL(records1, 0))"
    assert sorted((_stat(s)[1:] for s in stats.values()), key=str) == sorted([
        ("RecordsIn", {"Environment": "prod", "Source": "web"}, "Sum", 2700),
        ("RecordsIn", {"Environment": "prod", "Source": "app"}, "Sum", 2700)], key=str)
    assert (props["Threshold"], props["ComparisonOperator"], props["EvaluationPeriods"], props["TreatMissingData"]) == (
        1, "LessThanThreshold", 1, "breaching")
    _actions_ok(props)


def test_no_data_alarm_is_off_when_the_setting_is_null():
    assert not any(k.startswith("MonitoringNoData") for k in _two_sources(None))


def test_a_single_source_datasets_no_data_alarm(template):
    expression, stats = _math(_by_prefix(template, "NoDataOrders"))
    assert expression == "FILL(records, 0)"
    assert _stat(stats["records"]) == ("StreamLake", "RecordsIn", {"Environment": "prod", "Source": "orders"}, "Sum", 3600)


def test_freshness_alarm_does_not_treat_a_quiet_dataset_as_stale(template):
    assert _by_prefix(template, "FreshnessClickstream")["TreatMissingData"] == "notBreaching"


def test_job_failures_go_to_the_topic(template):
    template.has_resource_properties("AWS::Events::Rule", {
        "EventPattern": {
            "source": ["aws.glue"],
            "detail-type": ["Glue Job State Change"],
            # Not STOPPED: every deploy stops a run on purpose; a job that stays stopped is NotRunning's.
            "detail": {"state": ["FAILED", "TIMEOUT", "ERROR"], "jobName": ["clickstream-job", "orders-job", "compaction-job"]},
        },
        "Targets": [assertions.Match.object_like({"Arn": {"Ref": assertions.Match.string_like_regexp("MonitoringAlarmTopic")}})],
    })


def test_topic_is_encrypted_tls_only_and_subscribed(template):
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": assertions.Match.any_value()})
    template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": assertions.Match.array_with([
        assertions.Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_topic_and_key_let_this_accounts_alarms_and_eventbridge_publish(template):
    """CloudWatch alarms: sns:Publish in the topic policy with the alarms' ARN of this account and region, and the key
    with aws:SourceAccount too; EventBridge without conditions in both (documented: infra/monitoring.py), once."""
    (key,) = template.find_resources("AWS::KMS::Key").values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    alarms = next(s for s in statements if s.get("Sid") == "CloudWatchAlarmsOfThisAccount")
    rules = [s for s in statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert alarms["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert alarms["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1][-1] == ":alarm:*"
    assert len(rules) == 1 and "Condition" not in rules[0] and alarms["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    (policy,) = template.find_resources("AWS::SNS::TopicPolicy").values()
    topic_statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (publish,) = [s for s in topic_statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert publish["Action"] == "sns:Publish" and publish["Effect"] == "Allow"
    assert list(publish["Condition"]) == ["ArnLike"] and publish["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1][-1] == ":alarm:*"
    (events_publish,) = [s for s in topic_statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert "Condition" not in events_publish


def _metric_stats(alarm: dict) -> list[dict]:
    if "MetricName" in alarm:
        return [{"Namespace": alarm["Namespace"], "MetricName": alarm["MetricName"], "Dimensions": alarm.get("Dimensions", [])}]
    return [q["MetricStat"]["Metric"] | {"Dimensions": q["MetricStat"]["Metric"].get("Dimensions", [])}
            for q in alarm["Metrics"] if "MetricStat" in q]


# The dimension names each namespace publishes the watched metrics with (AWS docs; StreamLake: the jobs).
PUBLISHED_DIMENSIONS = {
    "AWS/Kinesis": {"StreamName"},
    "AWS/Kafka": {"Cluster Name", "Broker ID"},
    "Glue": {"JobName", "JobRunId", "Type"},
    # JobName: the job keeper's JobNotRunning and RestartsCapped (infra/functions/job_keeper/handler.py).
    "StreamLake": {"Environment", "Source", "Dataset", "JobName"},
    # The job keeper's Errors and AsyncEventsDropped (Lambda function metrics, dimension FunctionName).
    "AWS/Lambda": {"FunctionName"},
}


def test_no_alarm_in_any_environment_watches_a_metric_without_its_dimensions(templates):
    checked = parts = 0
    for env, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::CloudWatch::Alarm":
                continue
            for metric in _metric_stats(resource["Properties"]):
                names = {d["Name"] for d in metric["Dimensions"]}
                assert names, f"{env}/{logical_id}: {metric['MetricName']} has no dimensions"
                assert names <= PUBLISHED_DIMENSIONS[metric["Namespace"]], (env, logical_id, names)
                if metric["Namespace"] == "Glue":
                    assert names == PUBLISHED_DIMENSIONS["Glue"], (env, logical_id)
                if metric["Namespace"] == "StreamLake" and metric["MetricName"].startswith("Compaction"):
                    assert names == {"Environment"}, (env, logical_id)
                if metric["Namespace"] == "StreamLake" and metric["MetricName"] == "NewestEventAgeSeconds":
                    assert names == {"Dataset", "Environment"}, (env, logical_id)  # as glue_jobs.metrics publishes it
                elif metric["Namespace"] == "StreamLake" and "Dataset" in names:
                    # a routed source's dataset part, as glue_jobs.metrics publishes it (RecordsIn, DeadLetters)
                    source = {d["Name"]: d["Value"] for d in metric["Dimensions"]}["Source"]
                    assert source in load_config().get(env).routes, (env, logical_id, source)
                    assert names == {"Source", "Dataset", "Environment"}, (env, logical_id)
                    assert metric["MetricName"] in ("RecordsIn", "DeadLetters"), (env, logical_id)
                    parts += 1
                checked += 1
    assert checked >= 40 and parts >= 4  # dev's routed `events`: its two datasets' dead-letter and no-data alarms


def test_a_provisioned_stream_alarms_at_80_percent_of_its_shards_capacity(templates):
    """Per minute the highest of bytes in / (shards x 1 MiB/s), records in / (shards x 1,000/s) and bytes read /
    (shards x 2 MiB/s), for 5 minutes; on-demand streams (dev) have none."""
    from infra.config import load_config

    for environment, template in templates.items():
        config = load_config().get(environment)
        alarms = {k: v["Properties"] for k, v in template["Resources"].items()
                  if v["Type"] == "AWS::CloudWatch::Alarm" and k.startswith("MonitoringShardCapacity")}
        provisioned = [s for s in config.kinesis_streams if s.capacity_mode == "provisioned"]
        assert len(alarms) == len(provisioned), environment
        for stream in provisioned:
            (props,) = [p for k, p in alarms.items() if k.startswith(f"MonitoringShardCapacity{stream.name.capitalize()}")]
            expression = next(m["Expression"] for m in props["Metrics"] if "Expression" in m)
            n = stream.shard_count
            assert expression == (f"100 * MAX([bytes_in / {n * 1_048_576 * 60}, records_in / {n * 60_000}, "
                                  f"bytes_out / {n * 2 * 1_048_576 * 60}])")
            assert (props["Threshold"], props["EvaluationPeriods"]) == (80, 5)
            used = {m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
            assert used == {"IncomingBytes", "IncomingRecords", "GetRecords.Bytes"}

"""The deploy rehearsal: run the Glue jobs exactly as CloudFormation deploys them, on this machine.

For each job of an environment's synthesized cloud assembly (cdk.out): the script and the
`--extra-py-files` zip are the asset files CloudFormation uploads, the arguments are the job's
DefaultArguments with their CloudFormation expressions resolved, and the job runs in a fresh Python
process whose import path holds only the script, the zip, pyspark, AWS's `awsglue` library
(AWSGlueDataplanePython) and the AWS SDK the Glue runtime provides. What is JVM-side in Glue and absent
here is stood in by the Java classes in rehearsal/standin/ (each rule cites the page it follows).

    python -m rehearsal --env dev        # make rehearse ENV=dev

No module of the repository is importable by the job process: what it runs is what deploys.
"""

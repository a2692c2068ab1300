"""Command-line tools over the infrastructure that are not constructs: the PR diff, template snapshots,
architecture diagrams, capacity sizing, the feature-flag review, the IAM policy lint, and the
CloudFormation resource schemas they read. `infra/` holds the constructs and what composes them."""

// The deployment bucket's access logs (resources.extensions.ServerlessDeploymentBucket in serverless.yml): into
// the bucket that deploymentBucketLogBucket names, under echomq-reaper-<stage>/, or none (null: the property
// is left out). A bucket made here for them would need logs of its own in turn, so the account's access-log
// bucket is named instead; its policy must let logging.s3.amazonaws.com write (docs/deploy.md).
const { fail, param } = require('./params.cjs')

// An S3 bucket name: 3-63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit.
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

module.exports = {
  async logging({ resolveVariable }) {
    const bucket = await param(resolveVariable, 'deploymentBucketLogBucket')
    if (bucket === '') return null
    if (!BUCKET_NAME.test(bucket) || bucket.includes('..'))
      fail(`deploymentBucketLogBucket: expected an S3 bucket name (not an ARN), got: ${JSON.stringify(bucket)}`)
    const prefix = `${await resolveVariable('self:service')}-${await resolveVariable('sls:stage')}/`
    return { DestinationBucketName: bucket, LogFilePrefix: prefix }
  },
}

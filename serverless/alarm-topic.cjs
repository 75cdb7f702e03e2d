// The alarms' SNS topic, worked out at package time so the template holds no CloudFormation Condition and no
// empty Fn::If branch (cfn-lint checks every branch against the schema):
//   topic         where every alarm notifies: { Ref: AlarmTopic }, or the alarmTopicArn parameter as it is
//   topicFragment the AlarmTopic resource (encrypted with alarmTopicKmsKeyArn when given), or null
//   email         the e-mail subscription when alarmEmail is given, or null
const { fail, param } = require('./params.cjs')

module.exports = async ({ resolveVariable }) => {
  const topicArn = await param(resolveVariable, 'alarmTopicArn')
  if (topicArn !== '' && !/^arn:[\w-]+:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$/.test(topicArn))
    fail(`alarmTopicArn: expected an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>), got: ${JSON.stringify(topicArn)}`)
  const keyArn = await param(resolveVariable, 'alarmTopicKmsKeyArn')
  if (keyArn !== '' && !/^arn:[\w-]+:kms:[a-z0-9-]+:\d{12}:key\/[\w-]+$/.test(keyArn)) {
    fail(
      'alarmTopicKmsKeyArn: expected the ARN of a customer-managed KMS key (…:key/<id>) whose key policy lets ' +
        'cloudwatch.amazonaws.com use it (README: Deploying the reaper); an alias, alias/aws/sns above all, would ' +
        `stop every alarm's notification, got: ${JSON.stringify(keyArn)}`,
    )
  }
  if (keyArn !== '' && topicArn !== '')
    fail('alarmTopicKmsKeyArn: encrypts the topic the stack creates; with alarmTopicArn none is created')
  const email = await param(resolveVariable, 'alarmEmail')
  const topic = topicArn === '' ? { Ref: 'AlarmTopic' } : topicArn
  const name = `${await resolveVariable('self:service')}-${await resolveVariable('sls:stage')}-alarms`
  return {
    topic,
    topicFragment:
      topicArn !== ''
        ? null
        : {
            Resources: {
              AlarmTopic: {
                Type: 'AWS::SNS::Topic',
                Properties: { TopicName: name, ...(keyArn === '' ? {} : { KmsMasterKeyId: keyArn }) },
              },
            },
            Outputs: {
              AlarmTopicName: {
                Description: 'SNS topic the stack made for the alarms',
                Value: { 'Fn::GetAtt': ['AlarmTopic', 'TopicName'] },
              },
            },
          },
    email:
      email === ''
        ? null
        : {
            Resources: {
              AlarmEmailSubscription: {
                Type: 'AWS::SNS::Subscription',
                Properties: { TopicArn: topic, Protocol: 'email', Endpoint: email },
              },
            },
          },
  }
}

// provider.vpc: the function joins a VPC when the subnetIds and securityGroupIds parameters (comma lists)
// are given; with neither, no VPC (and no VPC policy on the role). One without the other stops packaging:
// a VPC half given used to deploy silently with no VPC at all.
const { fail, list } = require('./params.cjs')

async function vpc(resolveVariable) {
  const subnetIds = await list(resolveVariable, 'subnetIds')
  const securityGroupIds = await list(resolveVariable, 'securityGroupIds')
  if (subnetIds.length === 0 && securityGroupIds.length === 0) return null
  if (securityGroupIds.length === 0) {
    fail('subnetIds is set but securityGroupIds is not: a function in a VPC needs both (--param securityGroupIds=sg-1,sg-2)')
  }
  if (subnetIds.length === 0) {
    fail('securityGroupIds is set but subnetIds is not: a function in a VPC needs both (--param subnetIds=subnet-1,subnet-2)')
  }
  return { subnetIds, securityGroupIds }
}

module.exports = async ({ resolveVariable }) => vpc(resolveVariable)
module.exports.vpc = vpc

// provider.vpc for serverless.yml: the function joins a VPC only when both subnet and security group
// parameters are given (comma lists); otherwise no VPC and no VPC policy on the role.
module.exports = async ({ resolveVariable }) => {
  const list = async (name) =>
    String((await resolveVariable(`param:${name}, ''`)) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  const subnetIds = await list('subnetIds')
  const securityGroupIds = await list('securityGroupIds')
  return subnetIds.length > 0 && securityGroupIds.length > 0 ? { subnetIds, securityGroupIds } : null
}

// The usage guide's rules about JavaScript values that are not JSON (conformance/rules.json,
// "typescriptTest"): no JSON vector can carry them, so these tests of
// test/unit/javascript_values.test.ts cover them, under exactly these names.
export const kUndefinedRule = 'guide.payload.undefined: undefined anywhere in a payload is JSON_UNSUPPORTED_VALUE';
export const kClassInstancesRule =
  'guide.payload.class-instances: a Date, a Map or a class instance is JSON_UNSUPPORTED_VALUE';
export const kCircularRule = 'guide.payload.circular: a circular reference is JSON_UNSUPPORTED_VALUE';

export const javascriptRuleTests = [kUndefinedRule, kClassInstancesRule, kCircularRule];

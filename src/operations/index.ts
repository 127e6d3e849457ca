import type { AppServices } from '../services';
import type { OperationModule } from './operation';
import { codeSystemLookup } from './codesystem/lookup';
import { codeSystemSubsumes } from './codesystem/subsumes';
import { codeSystemValidateCode } from './codesystem/validate-code';
import { conceptMapTranslate } from './conceptmap/translate';
import { resourceValidate } from './resource/validate';
import { resourceResend } from './resource/resend';
import { subscriptionBindingToken } from './subscription/get-ws-binding-token';
import { importPackageOperation } from './system/import-package';
import { projectInit } from './project/init';
import { graphqlOperation } from './system/graphql';
import { measureEvaluateMeasure } from './measure/evaluate-measure';
import { patientEverything } from './patient/everything';
import { botDeploy } from './bot/deploy';
import { botExecute } from './bot/execute';
import { versions } from './system/versions';
import { valueSetBatchValidateCode } from './valueset/batch-validate-code';
import { valueSetCompare } from './valueset/compare';
import { valueSetExpand } from './valueset/expand';
import { valueSetValidateCode } from './valueset/validate-code';

/** Every operation the server offers; each is bound to its definition in definitions/ at boot. */
export const operationModules: OperationModule<AppServices>[] = [
  versions,
  valueSetValidateCode,
  valueSetExpand,
  codeSystemLookup,
  codeSystemValidateCode,
  codeSystemSubsumes,
  conceptMapTranslate,
  valueSetBatchValidateCode,
  valueSetCompare,
  resourceValidate,
  importPackageOperation,
  projectInit,
  graphqlOperation,
  patientEverything,
  resourceResend,
  subscriptionBindingToken,
  measureEvaluateMeasure,
  botDeploy,
  botExecute,
];

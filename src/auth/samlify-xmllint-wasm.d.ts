// The schema validator samlify takes (the package ships no typings).
declare module "@authenio/samlify-xmllint-wasm" {
  export function validate(xml: string): Promise<boolean>;
}

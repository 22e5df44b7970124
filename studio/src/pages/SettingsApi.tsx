export { default } from "./NotYet";

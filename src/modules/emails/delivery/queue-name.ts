export const DELIVERY_QUEUE = 'email-delivery';
